"""The request contract: one input serializer per endpoint both validates the request and
describes it in the OpenAPI document, so the two cannot drift.

The fields below are DRF fields (drf-spectacular reads their types, enums, lengths, bounds
and patterns into the schema) whose validation is ours: strict types (no "5" for 5 in a
JSON body, no 5 for "5"), a present value is always checked (an empty string or a null is
not "absent"), and the first bad parameter raises a 400 `invalid_parameter` naming it, with
the same sentences on every endpoint. Unknown fields are refused by `RequestSerializer.read`
(a typo must never silently change the answer); `format` is taken everywhere."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.fields import SkipField, empty

from .errors import InvalidJson, InvalidParameter

FORMATS = ("json", "toon")


class _Strict:
    """Missing means absent from the request; anything present is validated."""

    def get_value(self, dictionary):
        # DRF reads an empty query value of an optional field as absent; a present value
        # must be checked, so plain lookup (the last value of a repeated query parameter).
        return dictionary.get(self.field_name, empty) if isinstance(dictionary, Mapping) else empty

    def run_validation(self, data=empty):
        if data is empty:
            if self.required:
                raise InvalidParameter(self.field_name, self.required_reason())
            if self.default is empty:
                raise SkipField()
            default = self.get_default()
            return list(default) if isinstance(default, list) else default  # one field serves every request
        if data is None:
            raise InvalidParameter(self.field_name, f"must be {self.expected()}, not null")
        return self.parse(data)

    def required_reason(self) -> str:
        return "is required"

    def expected(self) -> str:
        raise NotImplementedError

    def parse(self, value):
        raise NotImplementedError

    def refuse(self, reason: str, **extra: Any):
        raise InvalidParameter(self.field_name, reason, **extra)


class Text(_Strict, serializers.CharField):
    """A string, trimmed, 1..max_length characters; `pattern` (a regex the trimmed value must
    match) is stated in the schema and checked with the given reason."""

    def __init__(self, *, max_length: int, pattern: str | None = None, pattern_reason: str = "", **kwargs):
        validators = [RegexValidator(pattern)] if pattern else []
        super().__init__(min_length=1, max_length=max_length, validators=validators, **kwargs)
        self.pattern = RegexValidator(pattern).regex if pattern else None
        self.pattern_reason = pattern_reason

    def expected(self) -> str:
        return "a string"

    def parse(self, value):
        if not isinstance(value, str):
            self.refuse(f"must be a string, not {type(value).__name__}")
        value = value.strip()
        if not value or len(value) > self.max_length:
            self.refuse(f"must be 1 to {self.max_length} characters")
        if self.pattern is not None and not self.pattern.search(value):
            self.refuse(self.pattern_reason.format(value=value))
        return value


class Integer(_Strict, serializers.IntegerField):
    def expected(self) -> str:
        return "an integer"

    def parse(self, value):
        if isinstance(value, bool):
            self.refuse("must be an integer, not a boolean")
        if isinstance(value, str):
            try:
                value = int(value.strip(), 10)
            except ValueError:
                self.refuse(f"must be an integer, not {value!r}")
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        elif not isinstance(value, int):
            self.refuse(f"must be an integer, not {type(value).__name__}")
        if self.min_value is not None and value < self.min_value:
            self.refuse(f"must be at least {self.min_value}", minimum=self.min_value)
        if self.max_value is not None and value > self.max_value:
            self.refuse(f"must be at most {self.max_value}", maximum=self.max_value)
        return value


class Choice(_Strict, serializers.ChoiceField):
    def __init__(self, options: Iterable[str], **kwargs):
        self.options = tuple(options)
        super().__init__(self.options, **kwargs)

    def required_reason(self) -> str:
        return f"is required: one of {', '.join(self.options)}"

    def expected(self) -> str:
        return f"one of {', '.join(self.options)}"

    def parse(self, value):
        if not isinstance(value, str) or value not in self.options:
            self.refuse(f"must be one of {', '.join(self.options)}, not {value!r}")
        return value


class UtcDate(_Strict, serializers.DateField):
    def __init__(self, **kwargs):
        super().__init__(format="%Y-%m-%d", input_formats=["%Y-%m-%d"], **kwargs)

    def required_reason(self) -> str:
        return "is required (YYYY-MM-DD, a UTC day)"

    def expected(self) -> str:
        return "a date string YYYY-MM-DD"

    def parse(self, value):
        if not isinstance(value, str):
            self.refuse("must be a date string YYYY-MM-DD")
        try:
            if len(value) != 10:
                raise ValueError
            return date.fromisoformat(value)
        except ValueError:
            self.refuse(f"must be a date YYYY-MM-DD, not {value!r}")


class ChoiceList(_Strict, serializers.ListField):
    """A non-empty array of distinct options, returned in the options' own order."""

    def __init__(self, options: Iterable[str], **kwargs):
        self.options = tuple(options)
        super().__init__(child=serializers.ChoiceField(self.options), min_length=1, **kwargs)

    def required_reason(self) -> str:
        return f"is required: a list of {', '.join(self.options)}"

    def expected(self) -> str:
        return f"an array of strings from {', '.join(self.options)}"

    def parse(self, value):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.refuse(f"must be an array of strings from {', '.join(self.options)}")
        unknown = [v for v in value if v not in self.options]
        if unknown:
            self.refuse(f"unknown value(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(self.options)}")
        if not value:
            self.refuse("must not be empty")
        return [o for o in self.options if o in value]  # canonical order, duplicates dropped


class Format(Choice):
    """Read by content negotiation before the view runs; declared here so the schema lists it
    and a value of the wrong type is refused like any other."""

    def __init__(self, **kwargs):
        super().__init__(FORMATS, required=False, help_text="json (default) or toon", **kwargs)


class RequestSerializer(serializers.Serializer):
    # The base of every endpoint's input serializer (a comment, not a docstring: a
    # serializer's docstring is its description in the OpenAPI document). `read` gives the
    # validated values or raises the 400 that names the first bad parameter; unknown fields
    # are refused before the view runs (config.api.views.AccountAPIView.initial).

    @classmethod
    def read(cls, data: Mapping) -> dict:
        if not isinstance(data, Mapping):
            raise InvalidJson()
        template = cls._template()
        values = {}
        for name, field in template.fields.items():
            try:
                values[name] = field.run_validation(field.get_value(data))
            except SkipField:
                pass
        return template.validate(values)

    @classmethod
    def _template(cls) -> "RequestSerializer":
        # One bound instance per class, its fields built once: DRF deep-copies every declared
        # field for each serializer it instantiates (~90 us a request for five fields, 6 us
        # this way). Sharing is safe because reading a request mutates nothing: the fields
        # keep no state and `validate` works on the dict it is given.
        template = cls.__dict__.get("_bound")
        if template is None:
            template = cls()
            template.fields  # noqa: B018  (bind them now, not on a request thread)
            cls._bound = template
        return template


def refuse_unknown_fields(data: Mapping, accepted: Iterable[str], *, where: str) -> None:
    """400 naming the fields of a request body or query string the endpoint does not take
    (besides `format`, which every endpoint takes)."""
    if not isinstance(data, Mapping):
        return  # not an object: reading it reports that
    accepted = ("format", *(name for name in accepted if name != "format"))
    unknown = [name for name in data if name not in accepted]
    if not unknown:
        return
    names = ", ".join(repr(name) for name in unknown)
    takes = ", ".join(accepted)
    raise InvalidParameter(
        unknown[0], f"unknown {where} field{'s' if len(unknown) > 1 else ''} {names}; this endpoint takes: {takes}",
        unknown=unknown, accepted=list(accepted))
