"""JSON (orjson, ~15x stdlib json) and TOON renderers for DRF."""

from __future__ import annotations

import orjson
from rest_framework.renderers import BaseRenderer

import toon
from .media import JSON, TOON


def to_json_bytes(data) -> bytes:
    # orjson writes NaN and Infinity as null, as the TOON encoder does.
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)


def to_toon_bytes(data) -> bytes:
    return toon.encode(data).encode("utf-8")


def _bodyless(renderer_context) -> bool:
    """204 and 304 responses have no body (RFC 9110); `None` there is not the JSON `null`
    that GET .../live serves with 200."""
    response = (renderer_context or {}).get("response")
    return response is not None and response.status_code in (204, 304)


class JSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = JSON
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None and _bodyless(renderer_context):
            return b""
        return to_json_bytes(data)


class TOONRenderer(BaseRenderer):
    media_type = "application/toon"
    format = TOON
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None and _bodyless(renderer_context):
            return b""
        return to_toon_bytes(data)


RENDER = {JSON: to_json_bytes, TOON: to_toon_bytes}
