"""Reading request parameters into values or a 400 invalid_parameter naming the parameter.
Used by every endpoint so the messages read the same everywhere."""

from __future__ import annotations

from datetime import date
from typing import Any, Iterable, Mapping

from .errors import InvalidParameter

_MISSING = object()


def text(data: Mapping, name: str, *, required: bool = True, default: Any = None,
         max_length: int = 100) -> str | None:
    value = data.get(name, _MISSING)
    if value is _MISSING or value is None or value == "":
        if required:
            raise InvalidParameter(name, "is required")
        return default
    if not isinstance(value, str):
        raise InvalidParameter(name, f"must be a string, not {type(value).__name__}")
    value = value.strip()
    if not value or len(value) > max_length:
        raise InvalidParameter(name, f"must be 1 to {max_length} characters")
    return value


def integer(data: Mapping, name: str, *, default: Any = _MISSING, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
    value = data.get(name, _MISSING)
    if value is _MISSING or value is None or value == "":
        if default is _MISSING:
            raise InvalidParameter(name, "is required")
        return default
    if isinstance(value, bool):
        raise InvalidParameter(name, "must be an integer, not a boolean")
    if isinstance(value, str):
        try:
            value = int(value.strip(), 10)
        except ValueError:
            raise InvalidParameter(name, f"must be an integer, not {value!r}") from None
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    elif not isinstance(value, int):
        raise InvalidParameter(name, f"must be an integer, not {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidParameter(name, f"must be at least {minimum}", minimum=minimum)
    if maximum is not None and value > maximum:
        raise InvalidParameter(name, f"must be at most {maximum}", maximum=maximum)
    return value


def choice(data: Mapping, name: str, options: Iterable[str], *, default: Any = _MISSING) -> str:
    options = tuple(options)
    value = data.get(name, _MISSING)
    if value is _MISSING or value is None or value == "":
        if default is _MISSING:
            raise InvalidParameter(name, f"is required: one of {', '.join(options)}")
        return default
    if not isinstance(value, str) or value not in options:
        raise InvalidParameter(name, f"must be one of {', '.join(options)}, not {value!r}")
    return value


def utc_date(data: Mapping, name: str, *, required: bool = True, default: date | None = None) -> date | None:
    value = data.get(name, _MISSING)
    if value is _MISSING or value is None or value == "":
        if required:
            raise InvalidParameter(name, "is required (YYYY-MM-DD, a UTC day)")
        return default
    if not isinstance(value, str):
        raise InvalidParameter(name, "must be a date string YYYY-MM-DD")
    try:
        if len(value) != 10:
            raise ValueError
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidParameter(name, f"must be a date YYYY-MM-DD, not {value!r}") from None


def string_list(data: Mapping, name: str, options: Iterable[str], *, default: Any = _MISSING,
                allow_empty: bool = False) -> list[str]:
    options = tuple(options)
    value = data.get(name, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise InvalidParameter(name, f"is required: a list of {', '.join(options)}")
        return list(default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidParameter(name, f"must be an array of strings from {', '.join(options)}")
    unknown = [v for v in value if v not in options]
    if unknown:
        raise InvalidParameter(name, f"unknown value(s) {', '.join(map(repr, unknown))}; "
                                     f"allowed: {', '.join(options)}")
    if not value and not allow_empty:
        raise InvalidParameter(name, "must not be empty")
    return [o for o in options if o in value]  # canonical order, duplicates dropped


def refuse_unknown_fields(data: Mapping, accepted: Iterable[str], *, where: str) -> None:
    """400 naming the fields of a request body or query string the endpoint does not take
    (besides `format`, which every endpoint takes)."""
    if not isinstance(data, Mapping):
        return  # not an object: the endpoint's own reading reports it
    accepted = ("format", *accepted)
    unknown = [name for name in data if name not in accepted]
    if not unknown:
        return
    names = ", ".join(repr(name) for name in unknown)
    takes = ", ".join(accepted)
    raise InvalidParameter(
        unknown[0], f"unknown {where} field{'s' if len(unknown) > 1 else ''} {names}; this endpoint takes: {takes}",
        unknown=unknown, accepted=list(accepted))
