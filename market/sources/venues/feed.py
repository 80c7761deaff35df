"""The asyncio side of the venue codecs: connect, subscribe, sync, reconnect. Plain Python.

`feed_for(venue, ws_url=, rest_url=, ...)` gives a `VenueFeed`; `await feed.stream(pair,
sink, on_status)` runs until cancelled or `close()`, and raises `SourceFatalError` when
retrying cannot help.

Rules:

* Every (re)sync hands the sink a BookSnapshot before the deltas that follow it; between a
  lost book and that snapshot no book event is sent (trades and quotes may be).
* Reconnects back off exponentially from `backoff_base` to `backoff_max` seconds, minus up
  to `backoff_jitter` of the delay at random, so many workers do not reconnect in step;
  the attempt count resets once the book is live again.
* A stream with no data message for `stale_after_s` is treated as dead: closed,
  reconnected, resynced (the status says so). Pings and acknowledgements are not data.
* A sequence gap resyncs from a new REST snapshot on the open socket (Binance); Coinbase's
  level2 has no sequence, so its only resync is a resubscription, on reconnect.
* Fatal, raised without retrying: Binance answering 400 code -1121 (unknown symbol) or
  another 4xx than 418/429; Coinbase's error message for an unknown product.
* `on_status(FeedStatus)` follows every transition: connecting, syncing, live,
  reconnecting, failed, closed, with the reason, counters and the last real message time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import time
from collections import deque
from typing import Any, Callable

import aiohttp
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from ..backoff import backoff_wait
from ..events import Event, PairRef
from ..exchange import SourceFatalError
from .binance import BinanceCodec
from .coinbase import CoinbaseCodec

logger = logging.getLogger(__name__)

CONNECTING, SYNCING, LIVE, RECONNECTING, FAILED, CLOSED = (
    "connecting", "syncing", "live", "reconnecting", "failed", "closed")
DEGRADED_AFTER = 3  # disconnects in the last 10 minutes
RECENT_MS = 600_000


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass(frozen=True)
class FeedStatus:
    state: str
    reason: str = ""
    since_ms: int = 0
    last_message_ms: int | None = None
    disconnects: int = 0
    recent_disconnects: int = 0
    degraded: bool = False
    resyncs: int = 0
    trades_missed: int = 0
    synced_at_ms: int | None = None
    snapshot_reach_pct: float | None = None  # the last snapshot reaches this far from the mid


NO_MESSAGE = object()  # a short wait ended with nothing received
SNAPSHOT_TRIES = 5  # a REST snapshot answered 418/429/5xx this many times drops the connection
SNAPSHOT_POLL_S = 0.05  # while a REST snapshot is awaited, how often the socket's wait gives way to it


class _Retry(Exception):
    """Drop the connection and reconnect (the reason is the message)."""


RETRYABLE = (_Retry, aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, OSError)


class _Busy(Exception):
    """The REST snapshot answered 418/429/5xx: ask again after a while."""

    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status


class VenueFeed:
    venue = ""

    def __init__(self, *, ws_url: str | None = None, rest_url: str | None = None, stale_after_s: float = 60.0,
                 backoff_base: float = 0.5, backoff_max: float = 30.0, backoff_jitter: float = 0.5,
                 sleep: Callable[[float], Any] | None = None, rng: random.Random | None = None):
        self.ws_url = (ws_url or self.WS_URL).rstrip("/")
        self.rest_url = (rest_url or self.REST_URL).rstrip("/")
        self.stale_after_s = stale_after_s
        self.backoff_base, self.backoff_max, self.backoff_jitter = backoff_base, backoff_max, backoff_jitter
        self._sleep = sleep or asyncio.sleep
        self._rng = rng or random.Random()
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._disconnects: deque[int] = deque()
        self._status = FeedStatus(CONNECTING, since_ms=_wall_ms())
        self._heard, self._stale = time.monotonic(), False  # the watchdog's (see _watched)
        self._last_message_ms: int | None = None  # kept apart: a status copy per message costs more than the message
        self._on_status: Callable[[FeedStatus], Any] = lambda status: None
        self.codec: Any = None

    # -- status -------------------------------------------------------------------------
    def _set(self, state: str, reason: str = "", **changes) -> None:
        now = _wall_ms()
        while self._disconnects and now - self._disconnects[0] > RECENT_MS:
            self._disconnects.popleft()
        recent = len(self._disconnects)
        since = now if state != self._status.state else self._status.since_ms
        self._status = dataclasses.replace(
            self._status, state=state, reason=reason, since_ms=since, recent_disconnects=recent,
            last_message_ms=self._last_message_ms,
            degraded=recent >= DEGRADED_AFTER, trades_missed=getattr(self.codec, "trades_missed", 0),
            synced_at_ms=getattr(self.codec, "synced_at_ms", None),
            snapshot_reach_pct=getattr(self.codec, "snapshot_reach_pct", None), **changes)
        self._on_status(self._status)

    def _deliver(self, message: dict, sink) -> bool:
        """A data message: heard now, its events to the sink, live once the codec syncs.
        Returns whether the codec was synced before it."""
        self._last_message_ms = _wall_ms()
        was_synced = self.codec.synced
        for event in self.codec.on_message(message):
            sink(event)
        if self.codec.synced and not was_synced:
            self._set(LIVE)
        return was_synced

    # -- the loop -----------------------------------------------------------------------
    async def stream(self, pair: PairRef, sink: Callable[[Event], Any], on_status: Callable[[FeedStatus], Any]):
        self._on_status = on_status
        self.codec = self.make_codec(pair)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30, sock_connect=10))

        def lost(state: RetryCallState) -> None:
            """A dropped connection: counted, the book lost, the status says so (before the wait)."""
            exc = state.outcome.exception()
            reason = str(exc) or type(exc).__name__
            if self._status.state == LIVE:
                state.attempt_number = 1  # the attempt count resets once the book was live
            self._disconnects.append(_wall_ms())
            self.codec.lose_book(reason)
            self._set(RECONNECTING, reason, disconnects=self._status.disconnects + 1)
            logger.warning("%s %s: %s; reconnecting (try %d)", self.venue, pair, reason, state.attempt_number)

        retrying = AsyncRetrying(retry=retry_if_exception_type(RETRYABLE), after=lost, reraise=True,
                                 wait=self._backoff, sleep=self._sleep)
        try:
            if not self._closed:
                self._set(CONNECTING)
            async for attempt in retrying:
                with attempt:
                    if not self._closed:
                        await self._connection(pair, sink)
        except SourceFatalError as exc:
            self._set(FAILED, exc.reason)
            raise
        finally:
            if self._status.state not in (FAILED,):
                self._set(CLOSED, self._status.reason)
            await self._session.close()

    @property
    def _backoff(self):
        """Before reconnect (or snapshot retry) n: min(backoff_max, backoff_base * 2**(n-1))
        seconds, minus up to backoff_jitter of it at random."""
        return backoff_wait(self.backoff_base, self.backoff_max, self.backoff_jitter, self._rng)

    async def _receive(self, ws, timeout: float | None = None) -> Any:
        """The next data message (None for a control frame). With `timeout`, waits at most
        that long and returns NO_MESSAGE. Without one it waits with no timer of its own
        (aiohttp's timeout context costs about as much as a small message): the watchdog
        of `_watched` ends a stream that stays silent for `stale_after_s`."""
        try:
            message = await (ws.receive(timeout=timeout) if timeout is not None else ws.receive())
        except asyncio.TimeoutError:
            return NO_MESSAGE
        self._heard = time.monotonic()
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
            if self._stale:
                raise _Retry(f"no message for {self.stale_after_s:g} s")
            raise _Retry(f"connection closed by the exchange ({ws.close_code})")
        if message.type == aiohttp.WSMsgType.ERROR:
            raise _Retry(f"connection error: {ws.exception()}")
        if message.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            return None
        return orjson.loads(message.data)

    @contextlib.asynccontextmanager
    async def _watched(self, ws):
        """Close `ws` when nothing arrived on it for `stale_after_s`; `_receive` then tells
        the stream is stale (reconnect and resync) rather than closed by the exchange."""
        self._heard, self._stale = time.monotonic(), False

        async def watch() -> None:
            every = min(1.0, self.stale_after_s / 4)
            while not ws.closed:
                await asyncio.sleep(every)
                if time.monotonic() - self._heard > self.stale_after_s:
                    self._stale = True
                    await ws.close()
                    return

        watchdog = asyncio.ensure_future(watch())
        try:
            yield ws
        finally:
            watchdog.cancel()

    async def close(self) -> None:
        self._closed = True
        if self._session is not None and not self._session.closed:
            await self._session.close()


class BinanceFeed(VenueFeed):
    """wss://stream.binance.com:9443/stream?streams=<s>@depth@100ms/<s>@trade/<s>@bookTicker
    and GET /api/v3/depth (the documented way to keep a local book)."""

    venue = "binance"
    WS_URL = "wss://stream.binance.com:9443"
    REST_URL = "https://api.binance.com"
    DEPTH_LIMIT = 5000

    def make_codec(self, pair: PairRef) -> BinanceCodec:
        return BinanceCodec(pair.base + pair.quote)

    async def _snapshot(self, symbol: str) -> dict:
        """The REST depth snapshot; retried with backoff on 418/429/5xx (SNAPSHOT_TRIES), fatal on 4xx."""
        retrying = AsyncRetrying(retry=retry_if_exception_type(_Busy), stop=stop_after_attempt(SNAPSHOT_TRIES), reraise=True,
                                 wait=self._backoff, sleep=self._sleep)
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._snapshot_once(symbol)
        except _Busy as exc:
            raise _Retry(f"depth snapshot: HTTP {exc.status} {SNAPSHOT_TRIES} times") from None

    async def _snapshot_once(self, symbol: str) -> dict:
        async with self._session.get(f"{self.rest_url}/api/v3/depth",
                                     params={"symbol": symbol, "limit": str(self.DEPTH_LIMIT)}) as response:
            body = await response.read()
            if response.status == 200:
                return orjson.loads(body)
            detail = body[:300].decode("utf-8", "replace")
            if 400 <= response.status < 500 and response.status not in (418, 429):
                try:
                    error = json.loads(detail)
                except ValueError:
                    error = {}
                what = "unknown symbol" if error.get("code") == -1121 else f"HTTP {response.status}"
                raise SourceFatalError(f"binance {symbol}: {what}: {error.get('msg', detail)}")
        raise _Busy(response.status)

    async def _connection(self, pair: PairRef, sink) -> None:
        codec: BinanceCodec = self.codec
        symbol = codec.symbol
        name = symbol.lower()
        url = f"{self.ws_url}/stream?streams={name}@depth@100ms/{name}@trade/{name}@bookTicker"
        async with self._session.ws_connect(url, heartbeat=None, autoping=True, max_msg_size=0) as socket, \
                self._watched(socket) as ws:
            self._set(SYNCING, "waiting for the depth snapshot")
            fetch: asyncio.Task | None = asyncio.ensure_future(self._snapshot(symbol))
            try:
                while True:
                    # One awaited receive per message. While the REST snapshot is awaited the
                    # receive gives way every SNAPSHOT_POLL_S, so a quiet stream still syncs.
                    if fetch is None:
                        message = await self._receive(ws)
                    else:
                        message = await self._receive(ws, SNAPSHOT_POLL_S)
                        if fetch.done():
                            snapshot, fetch = fetch.result(), None  # raises what the fetch raised
                            for event in codec.on_snapshot(snapshot):
                                sink(event)
                            if codec.synced:
                                self._set(LIVE)
                    if message is None or message is NO_MESSAGE:
                        continue
                    was_synced = self._deliver(message, sink)
                    if codec.synced:
                        continue
                    if codec.wants_snapshot and fetch is None and (was_synced or not codec.has_snapshot):
                        if was_synced:
                            self._status = dataclasses.replace(self._status, resyncs=self._status.resyncs + 1)
                        self._set(SYNCING, codec.wants_snapshot)
                        fetch = asyncio.ensure_future(self._snapshot(symbol))
            finally:
                if fetch is not None:
                    fetch.cancel()


class CoinbaseFeed(VenueFeed):
    """wss://ws-feed.exchange.coinbase.com, channels level2_batch (level2's messages batched every
    50 ms, public; level2 itself now needs an authenticated connection), matches and ticker."""

    venue = "coinbase"
    WS_URL = "wss://ws-feed.exchange.coinbase.com"
    REST_URL = "https://api.exchange.coinbase.com"

    def make_codec(self, pair: PairRef) -> CoinbaseCodec:
        return CoinbaseCodec(f"{pair.base}-{pair.quote}")

    async def _connection(self, pair: PairRef, sink) -> None:
        codec: CoinbaseCodec = self.codec
        async with self._session.ws_connect(self.ws_url + "/", heartbeat=None, autoping=True, max_msg_size=0) as socket, \
                self._watched(socket) as ws:
            await ws.send_str(json.dumps({"type": "subscribe", "product_ids": [codec.product],
                                          "channels": ["level2_batch", "matches", "ticker"]}))
            self._set(SYNCING, "waiting for the level2 snapshot")
            while True:
                message = await self._receive(ws)
                if message is None:
                    continue
                if message.get("type") == "error":
                    raise SourceFatalError(f"coinbase {codec.product}: {message.get('message', '')}: "
                                           f"{message.get('reason', '')}")
                if message.get("type") in ("subscriptions", "heartbeat"):
                    continue
                self._deliver(message, sink)


FEEDS = {"binance": BinanceFeed, "coinbase": CoinbaseFeed}


def feed_for(venue: str, **options) -> VenueFeed:
    try:
        return FEEDS[venue](**options)
    except KeyError:
        raise ValueError(f"no venue feed for {venue!r}: {', '.join(FEEDS)}") from None

