"""DRF content negotiation with the precedence of SPEC.md 4.11 (see config.api.media)."""

from __future__ import annotations

import orjson
from rest_framework.negotiation import BaseContentNegotiation

from .errors import InvalidParameter, UnsupportedMediaType
from .media import choose_format


def body_format(request) -> object:
    """The `format` field of a JSON object body, read without consuming DRF's parse: a body
    that does not parse simply has no format here; the parser reports it later."""
    django_request = getattr(request, "_request", request)
    if django_request.method not in ("POST", "PUT", "PATCH"):
        return None
    if "json" not in django_request.content_type:  # lower-cased by Django, as the parser matches it
        return None
    try:
        parsed = orjson.loads(django_request.body or b"null")
    except (orjson.JSONDecodeError, ValueError):
        return None
    except Exception:  # body too large and the like: the view reports it
        return None
    return parsed.get("format") if isinstance(parsed, dict) else None


class FormatNegotiation(BaseContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        choice = choose_format(
            request.META.get("HTTP_ACCEPT"),
            body_format(request),
            request.query_params.get("format"),
        )
        by_format = {renderer.format: renderer for renderer in renderers}
        renderer = by_format.get(choice.format) or renderers[0]
        request.accepted_renderer = renderer
        request.accepted_media_type = renderer.media_type
        if not choice.acceptable:
            raise UnsupportedMediaType()
        if choice.error is not None:
            raise InvalidParameter("format", str(choice.error), source=choice.error.source)
        return renderer, renderer.media_type

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None
