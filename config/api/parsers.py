import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from .errors import InvalidJson, PayloadTooLarge


class JSONObjectParser(BaseParser):
    """Request bodies are JSON objects (API.md). Anything else is 400 invalid_json."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:  # a body that did not declare its length
            raise PayloadTooLarge(f"The request body is over the limit of {limit} bytes.")
        if not raw.strip():
            return {}
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ParseError(str(exc)) from exc
        if not isinstance(data, dict):
            raise InvalidJson("The request body must be a JSON object, not "
                              f"{type(data).__name__.replace('dict', 'object')}.")
        return data
