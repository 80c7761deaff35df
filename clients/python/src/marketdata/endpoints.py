"""Every endpoint of the API as a `Call`: its method, path, parameters and the reader of
its answer. The sync and async clients send these; nothing here does I/O.

Only the arguments the caller gave are sent: the API checks every field present (a
`null` is not an absent field), so an unset option must not travel as null."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any, Iterable

from .models import (PairList, Ranking, SchemeHistory, Series, Snapshot, StreamStatus, StreamToken, Subscription,
                     Unsubscribed, Usage, LatestBar)
from .transport import Call, pair_path

SERIES_ENDPOINTS = ("candlestick", "limit-orders", "trades", "spread")


def _given(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def _day(value: str | date | None) -> str | None:
    """A UTC day as the API writes it (YYYY-MM-DD)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        value = (value.astimezone(timezone.utc) if value.tzinfo else value).date()
    return value.isoformat()


def _epoch_ms(value: int | datetime | None) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if value.tzinfo is None:
        raise ValueError("a naive datetime is ambiguous: give it a timezone (the API counts in UTC)")
    return int(value.timestamp() * 1000)


def _read(model: type) -> Any:
    def read(document: Any, *, quota: Any, request_id: Any, status: int) -> Any:
        return model.from_wire(document, quota=quota, request_id=request_id)
    return read


def series(endpoint: str, *, exchange: str, symbol: str, start: str | date, end: str | date | None = None,
           resolution: str | None = None, side: str | None = None) -> Call:
    if endpoint not in SERIES_ENDPOINTS:
        raise ValueError(f"no series {endpoint!r}; the series are {', '.join(SERIES_ENDPOINTS)}")
    body = _given(exchange=exchange, symbol=symbol, start=_day(start), end=_day(end), resolution=resolution,
                  side=side)
    return Call("POST", f"/market/{endpoint}", _read(Series), json=body)


def usage() -> Call:
    return Call("GET", "/me/usage", _read(Usage))


def top_tokens(*, exchange: str, n: int | None = None) -> Call:
    return Call("GET", "/rank/top", _read(Ranking), params=_given(exchange=exchange, n=n))


def pairs() -> Call:
    return Call("GET", "/streams", _read(PairList))


def subscribe(pair: str | tuple[str, str, str], *, metrics: Iterable[str] | None = None) -> Call:
    exchange, base, quote = pair_path(pair).split("/")
    body = _given(exchange=exchange, base=base, quote=quote, metrics=list(metrics) if metrics is not None else None)

    def read(document: Any, *, quota: Any, request_id: Any, status: int) -> Subscription:
        return Subscription.from_wire({**document, "created": status == 201}, quota=quota, request_id=request_id)

    return Call("POST", "/streams", read, json=body)


def unsubscribe(pair: str | tuple[str, str, str], *, metric: str | None = None) -> Call:
    def read(document: Any, *, quota: Any, request_id: Any, status: int) -> Unsubscribed:
        return Unsubscribed(quota=quota, request_id=request_id)

    return Call("DELETE", f"/streams/{pair_path(pair)}", read, params=_given(metric=metric))


def status(pair: str | tuple[str, str, str]) -> Call:
    return Call("GET", f"/streams/{pair_path(pair)}/status", _read(StreamStatus))


def snapshot(pair: str | tuple[str, str, str], *, metrics: Iterable[str], granularity: str,
             from_ms: int | datetime | None = None, to_ms: int | datetime | None = None) -> Call:
    body = _given(metrics=list(metrics), granularity=granularity, from_ms=_epoch_ms(from_ms), to_ms=_epoch_ms(to_ms))
    return Call("POST", f"/streams/{pair_path(pair)}/snapshot", _read(Snapshot), json=body)


def latest(pair: str | tuple[str, str, str]) -> Call:
    return Call("GET", f"/streams/{pair_path(pair)}/live", _read(LatestBar))


def stream_token(pair: str | tuple[str, str, str]) -> Call:
    return Call("POST", f"/streams/{pair_path(pair)}/token", _read(StreamToken))


def schemes(pair: str | tuple[str, str, str], *, lookback_hours: int | None = None, limit: int | None = None) -> Call:
    return Call("GET", f"/streams/{pair_path(pair)}/schemes", _read(SchemeHistory),
                params=_given(lookback_hours=lookback_hours, limit=limit))
