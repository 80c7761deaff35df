from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpResponse

from .errors import InternalError, PayloadTooLarge, as_api_error, request_id_from
from .media import CONTENT_TYPES, JSON, choose_format
from .renderers import RENDER

logger = logging.getLogger("config.api")
API_PREFIXES = ("/api/", "/v1/")


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIXES)


def error_response(request, error, fmt: str | None = None) -> HttpResponse:
    """The envelope for an error raised outside DRF, in `fmt` or else the format the
    request asked for (JSON when it asked for nothing we serve)."""
    if fmt is None:
        choice = choose_format(request.META.get("HTTP_ACCEPT"), None, request.GET.get("format"))
        fmt = choice.format if choice.acceptable and choice.error is None else JSON
    body = error.envelope(getattr(request, "request_id", ""))
    response = HttpResponse(RENDER[fmt](body), status=error.status_code,
                            content_type=CONTENT_TYPES[fmt])
    for name, value in error.headers.items():
        response[name] = value
    return response


class RequestIdMiddleware:
    """Every response carries X-Request-Id: the client's own when it sent a sane one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        assign_request_id(request)
        response = self.get_response(request)
        response["X-Request-Id"] = request.request_id
        return response


def assign_request_id(request) -> str:
    """The request's id: the client's own X-Request-Id when it sent a sane one."""
    request.request_id = request_id_from(request.META.get("HTTP_X_REQUEST_ID"))
    return request.request_id


class ApiErrorMiddleware:
    """Errors that never reach DRF's handler (oversized bodies, unexpected exceptions in
    middleware or non-DRF views) still leave API paths in the envelope."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if is_api_path(request.path):
            too_large = oversized_body(request)
            if too_large is not None:
                return error_response(request, too_large)
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not is_api_path(request.path):
            return None
        error = as_api_error(exception)
        if error is None:
            logger.exception("Unhandled error in %s", request.path, exc_info=exception)
            error = InternalError()
        return error_response(request, error)


def oversized_body(request) -> PayloadTooLarge | None:
    """413 for a request that declares a body over the upload limit."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return PayloadTooLarge(f"The request body is {length} bytes; the limit is "
                               f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE}.")
    return None
