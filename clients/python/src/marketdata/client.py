"""`Client` and `AsyncClient`: one method per endpoint of the API, the same names and
arguments in both. Pairs of the stream methods are written `exchange/BASE/QUOTE`
(`"binance/BTC/USDT"`), series symbols `BASE-QUOTE`, as the API writes them."""

from __future__ import annotations

import os
from datetime import date, datetime
from typing import Any, Iterable

import httpx

from . import endpoints
from .models import (CandlestickRow, LatestBar, LimitOrdersRow, PairList, Ranking, SchemeHistory, Series, Snapshot,
                     SpreadRow, StreamStatus, StreamToken, Subscription, TradesRow, Unsubscribed, Usage)
from .streaming import AsyncLiveFeed, LiveFeed
from .transport import AsyncTransport, QuotaWait, SyncTransport, api_base, headers_for
from .wire import Format, accept_header

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
Pair = str | tuple[str, str, str]
Day = str | date


class _Settings:
    """The arguments both clients take."""

    def __init__(self, api_key: str | None, base_url: str | None, format: Format, timeout: float,
                 wait_on_quota: bool, max_wait: float):
        api_key = api_key or os.environ.get("MARKETDATA_API_KEY")
        if not api_key:
            raise ValueError("an API key is needed: pass api_key= or set MARKETDATA_API_KEY")
        accept_header(format)  # refuse an unknown format now rather than at the first call
        self.api_key, self.format, self.timeout = api_key, format, timeout
        self.base_url = api_base(base_url or os.environ.get("MARKETDATA_BASE_URL") or DEFAULT_BASE_URL)
        self.quota_wait = QuotaWait(wait_on_quota, max_wait)

    def http_options(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "headers": headers_for(self.api_key, self.format), "timeout": self.timeout}


class Client:
    """The API, synchronously.

    `format` is what travels on the wire ("json" or "toon"; the results are the same).
    With `wait_on_quota=True` a 429 is waited out when its Retry-After is within
    `max_wait` seconds (counted over the retries of one call); otherwise it raises
    QuotaExceeded at once. `transport` replaces httpx's (tests use httpx.MockTransport)."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, *, format: Format = "json",
                 timeout: float = 30.0, wait_on_quota: bool = False, max_wait: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        self._settings = _Settings(api_key, base_url, format, timeout, wait_on_quota, max_wait)
        self._http = httpx.Client(transport=transport, **self._settings.http_options())
        self._transport = SyncTransport(self._http, self._settings.quota_wait)

    @property
    def format(self) -> Format:
        return self._settings.format

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- historical series (`api` feature) --

    def candlestick(self, exchange: str, symbol: str, start: Day, end: Day, *,
                    resolution: str | None = None) -> Series[CandlestickRow]:
        """OHLC rows per day (or hour with `resolution="hourly"`), `end` included."""
        return self._transport.send(endpoints.series("candlestick", exchange=exchange, symbol=symbol, start=start,
                                                     end=end, resolution=resolution))

    def limit_orders(self, exchange: str, symbol: str, start: Day, end: Day | None = None, *,
                     side: str | None = None, resolution: str | None = None) -> Series[LimitOrdersRow]:
        """Resting depth within 1 % of mid; `side="bid_amount"` / `"ask_amount"` serves one side."""
        return self._transport.send(endpoints.series("limit-orders", exchange=exchange, symbol=symbol, start=start,
                                                     end=end, side=side, resolution=resolution))

    def trades(self, exchange: str, symbol: str, start: Day, end: Day, *,
               resolution: str | None = None) -> Series[TradesRow]:
        return self._transport.send(endpoints.series("trades", exchange=exchange, symbol=symbol, start=start,
                                                     end=end, resolution=resolution))

    def spread(self, exchange: str, symbol: str, start: Day, end: Day, *,
               resolution: str | None = None) -> Series[SpreadRow]:
        return self._transport.send(endpoints.series("spread", exchange=exchange, symbol=symbol, start=start,
                                                     end=end, resolution=resolution))

    def top_tokens(self, exchange: str, n: int | None = None) -> Ranking:
        """Tokens by market-cap rank that trade on the exchange, with their pairs."""
        return self._transport.send(endpoints.top_tokens(exchange=exchange, n=n))

    def usage(self) -> Usage:
        """This UTC month's requests and bytes (not itself counted)."""
        return self._transport.send(endpoints.usage())

    # -- streams (`streaming` feature) --

    def pairs(self) -> PairList:
        """Every pair that can be streamed, and whether this account subscribes to it."""
        return self._transport.send(endpoints.pairs())

    def subscribe(self, pair: Pair, metrics: Iterable[str] | None = None) -> Subscription:
        """Subscribe (billed per pair); adds `metrics` (trade, book, quote; default all) to any held."""
        return self._transport.send(endpoints.subscribe(pair, metrics=metrics))

    def unsubscribe(self, pair: Pair, metric: str | None = None) -> Unsubscribed:
        """Drop the pair, or only one metric of it; dropping what is not held is no error."""
        return self._transport.send(endpoints.unsubscribe(pair, metric=metric))

    def status(self, pair: Pair) -> StreamStatus:
        return self._transport.send(endpoints.status(pair))

    def snapshot(self, pair: Pair, metrics: Iterable[str], granularity: str, *,
                 from_ms: int | datetime | None = None, to_ms: int | datetime | None = None) -> Snapshot:
        """Stored bars (second, minute, hour, or day for trade only) of a subscribed pair."""
        return self._transport.send(endpoints.snapshot(pair, metrics=metrics, granularity=granularity,
                                                       from_ms=from_ms, to_ms=to_ms))

    def latest(self, pair: Pair) -> LatestBar:
        """The latest 1-second bar (`.bar`, None before the first); `live()` follows them all."""
        return self._transport.send(endpoints.latest(pair))

    def stream_token(self, pair: Pair) -> StreamToken:
        """A 5-minute token for a browser's EventSource."""
        return self._transport.send(endpoints.stream_token(pair))

    def schemes(self, pair: Pair, *, lookback_hours: int | None = None, limit: int | None = None) -> SchemeHistory:
        """Spoofing schemes detected on the pair, newest first."""
        return self._transport.send(endpoints.schemes(pair, lookback_hours=lookback_hours, limit=limit))

    def live(self, pair: Pair, *, last_event_id: str | None = None, backoff: tuple[float, float] = (0.25, 10.0),
             give_up_after: float | None = None) -> LiveFeed:
        """The live feed of a subscribed pair: bars, scheme events and status changes, for
        ever, across lost connections (resumed without gap or repeat). `last_event_id`
        resumes from an earlier feed's position; `backoff` is (first, longest) delay in
        seconds; `give_up_after` raises the connection error after that many seconds
        without one (None: never)."""
        return LiveFeed(self._http, self._settings.api_key, pair,
                        last_event_id=last_event_id, backoff=backoff, give_up_after=give_up_after)


class AsyncClient:
    """The API, for asyncio: the methods of `Client`, awaited; `live()` is an async iterator."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, *, format: Format = "json",
                 timeout: float = 30.0, wait_on_quota: bool = False, max_wait: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        self._settings = _Settings(api_key, base_url, format, timeout, wait_on_quota, max_wait)
        self._http = httpx.AsyncClient(transport=transport, **self._settings.http_options())
        self._transport = AsyncTransport(self._http, self._settings.quota_wait)

    @property
    def format(self) -> Format:
        return self._settings.format

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def candlestick(self, exchange: str, symbol: str, start: Day, end: Day, *,
                          resolution: str | None = None) -> Series[CandlestickRow]:
        return await self._transport.send(endpoints.series("candlestick", exchange=exchange, symbol=symbol,
                                                           start=start, end=end, resolution=resolution))

    async def limit_orders(self, exchange: str, symbol: str, start: Day, end: Day | None = None, *,
                           side: str | None = None, resolution: str | None = None) -> Series[LimitOrdersRow]:
        return await self._transport.send(endpoints.series("limit-orders", exchange=exchange, symbol=symbol,
                                                           start=start, end=end, side=side, resolution=resolution))

    async def trades(self, exchange: str, symbol: str, start: Day, end: Day, *,
                     resolution: str | None = None) -> Series[TradesRow]:
        return await self._transport.send(endpoints.series("trades", exchange=exchange, symbol=symbol, start=start,
                                                           end=end, resolution=resolution))

    async def spread(self, exchange: str, symbol: str, start: Day, end: Day, *,
                     resolution: str | None = None) -> Series[SpreadRow]:
        return await self._transport.send(endpoints.series("spread", exchange=exchange, symbol=symbol, start=start,
                                                           end=end, resolution=resolution))

    async def top_tokens(self, exchange: str, n: int | None = None) -> Ranking:
        return await self._transport.send(endpoints.top_tokens(exchange=exchange, n=n))

    async def usage(self) -> Usage:
        return await self._transport.send(endpoints.usage())

    async def pairs(self) -> PairList:
        return await self._transport.send(endpoints.pairs())

    async def subscribe(self, pair: Pair, metrics: Iterable[str] | None = None) -> Subscription:
        return await self._transport.send(endpoints.subscribe(pair, metrics=metrics))

    async def unsubscribe(self, pair: Pair, metric: str | None = None) -> Unsubscribed:
        return await self._transport.send(endpoints.unsubscribe(pair, metric=metric))

    async def status(self, pair: Pair) -> StreamStatus:
        return await self._transport.send(endpoints.status(pair))

    async def snapshot(self, pair: Pair, metrics: Iterable[str], granularity: str, *,
                       from_ms: int | datetime | None = None, to_ms: int | datetime | None = None) -> Snapshot:
        return await self._transport.send(endpoints.snapshot(pair, metrics=metrics, granularity=granularity,
                                                             from_ms=from_ms, to_ms=to_ms))

    async def latest(self, pair: Pair) -> LatestBar:
        return await self._transport.send(endpoints.latest(pair))

    async def stream_token(self, pair: Pair) -> StreamToken:
        return await self._transport.send(endpoints.stream_token(pair))

    async def schemes(self, pair: Pair, *, lookback_hours: int | None = None,
                      limit: int | None = None) -> SchemeHistory:
        return await self._transport.send(endpoints.schemes(pair, lookback_hours=lookback_hours, limit=limit))

    def live(self, pair: Pair, *, last_event_id: str | None = None, backoff: tuple[float, float] = (0.25, 10.0),
             give_up_after: float | None = None) -> AsyncLiveFeed:
        return AsyncLiveFeed(self._http, self._settings.api_key, pair,
                             last_event_id=last_event_id, backoff=backoff, give_up_after=give_up_after)
