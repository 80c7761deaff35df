"""Which format a response is served in (SPEC.md 4.11), decided without Django so every
layer (DRF views, middleware errors, the SSE refusals) decides the same way.

Precedence: an Accept header that prefers TOON, then the body's `format`, then the query's
`format`, then JSON. An Accept header that admits neither type is refused (415)."""

from __future__ import annotations

from dataclasses import dataclass

JSON = "json"
TOON = "toon"
FORMATS = (JSON, TOON)
MEDIA_TYPES = {JSON: "application/json", TOON: "application/toon"}
CONTENT_TYPES = {JSON: "application/json", TOON: "application/toon; charset=utf-8"}
# text/toon is the TOON specification's provisional type; we read it as ours.
_TOON_TYPES = {"application/toon", "text/toon"}


@dataclass(frozen=True)
class AcceptVerdict:
    """What the Accept header says: whether it prefers TOON, and whether it admits anything."""

    prefers_toon: bool
    acceptable: bool


def _quality(params: list[str]) -> float:
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return min(max(q, 0.0), 1.0)
    return 1.0


def _specificity(range_: str, media_type: str) -> int | None:
    """How specifically a media range matches a type: 2 exact, 1 type/*, 0 */*, None no match."""
    if range_ == media_type:
        return 2
    main, _, sub = range_.partition("/")
    if sub == "*" and media_type.startswith(main + "/"):
        return 1
    if range_ == "*/*" or range_ == "*":
        return 0
    return None


def _best_quality(ranges: list[tuple[str, float]], media_types: set[str]) -> float:
    best_spec, best_q = -1, 0.0
    for range_, q in ranges:
        for media_type in media_types:
            spec = _specificity(range_, media_type)
            if spec is not None and spec > best_spec:
                best_spec, best_q = spec, q
    return best_q if best_spec >= 0 else 0.0


def read_accept(header: str | None) -> AcceptVerdict:
    if not header or not header.strip():
        return AcceptVerdict(prefers_toon=False, acceptable=True)
    ranges: list[tuple[str, float]] = []
    for part in header.split(","):
        media_range, *params = part.split(";")
        media_range = media_range.strip().lower()
        if media_range:
            ranges.append((media_range, _quality(params)))
    if not ranges:
        return AcceptVerdict(prefers_toon=False, acceptable=True)
    json_q = _best_quality(ranges, {"application/json"})
    toon_q = _best_quality(ranges, _TOON_TYPES)
    toon_named = any(r in _TOON_TYPES and q > 0 for r, q in ranges)
    prefers_toon = toon_q > json_q or (toon_named and toon_q >= json_q and toon_q > 0)
    return AcceptVerdict(prefers_toon=prefers_toon, acceptable=max(json_q, toon_q) > 0)


class FormatError(ValueError):
    """A `format` value that is neither json nor toon; `source` is body or query."""

    def __init__(self, source: str, value: object):
        self.source, self.value = source, value
        super().__init__(f"format must be 'json' or 'toon', not {value!r}")


@dataclass(frozen=True)
class FormatChoice:
    format: str
    acceptable: bool
    error: FormatError | None


def choose_format(accept: str | None, body_format: object = None,
                  query_format: object = None) -> FormatChoice:
    """The served format. An invalid `format` is reported in `error` while the choice still
    falls back to the best valid rule, so the 400 itself is served in a format the client
    asked for."""
    verdict = read_accept(accept)
    error = None
    for source, value in (("body", body_format), ("query", query_format)):
        if value is not None and value not in FORMATS and error is None:
            error = FormatError(source, value)
    if verdict.prefers_toon:
        chosen = TOON
    elif body_format in FORMATS:
        chosen = body_format
    elif query_format in FORMATS:
        chosen = query_format
    else:
        chosen = JSON
    return FormatChoice(format=chosen, acceptable=verdict.acceptable, error=error)
