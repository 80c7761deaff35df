"""The two wire formats. The client asks with `Accept` (the first rule of the API's
negotiation) and decodes by the Content-Type the server states, so an error served in
either format is read alike."""

from __future__ import annotations

import json
from typing import Any, Literal

import toon_format

from .errors import ProtocolError

Format = Literal["json", "toon"]
MEDIA_TYPES: dict[str, str] = {"json": "application/json", "toon": "application/toon"}


def accept_header(format: str) -> str:
    if format not in MEDIA_TYPES:
        raise ValueError(f"format must be 'json' or 'toon', not {format!r}")
    return MEDIA_TYPES[format]


def decode(content: bytes, content_type: str | None) -> Any:
    """The document of a response body, JSON or TOON by its Content-Type."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    try:
        if media_type == "application/toon":
            return toon_format.decode(content.decode("utf-8"))
        return json.loads(content)
    except (ValueError, toon_format.ToonDecodeError) as exc:
        raise ProtocolError(f"unreadable {media_type or 'untyped'} body: {content[:200]!r}") from exc
