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
* Binance pairs of one event loop share their connections (up to PAIRS_PER_CONNECTION
  each, joining and leaving by SUBSCRIBE / UNSUBSCRIBE; `_BinanceConnection` has the
  rules): for a pair, "reconnect" is leaving its connection and joining one again, and
  "stale" is its own silence; a dropped connection drops each of its pairs with the reason.
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
import weakref
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


SNAPSHOT_TRIES = 5  # a REST snapshot answered 418/429/5xx this many times drops the connection


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

    async def _receive(self, ws) -> Any:
        """The next data message (None for a control frame), waited for with no timer of its
        own (aiohttp's timeout context costs about as much as a small message): the watchdog
        of `_watched` ends a stream that stays silent for `stale_after_s`."""
        message = await ws.receive()
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
    (the combined streams of many pairs on one connection) and GET /api/v3/depth (the
    documented way to keep a local book)."""

    venue = "binance"
    WS_URL = "wss://stream.binance.com:9443"
    REST_URL = "https://api.binance.com"
    DEPTH_LIMIT = 5000
    DEPTH_WEIGHT = 250  # Binance's request weight of a depth snapshot of 1,001-5,000 levels

    def __init__(self, *, rest_weight_per_minute: float = 0.0, **options):
        """rest_weight_per_minute: the request weight this event loop's snapshots may spend a
        minute (`_RestBudget`; 0: no budget)."""
        super().__init__(**options)
        self.rest_weight_per_minute = rest_weight_per_minute

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
        if self.rest_weight_per_minute:
            await _RestBudget.of(self.rest_url, self.rest_weight_per_minute).spend(self.DEPTH_WEIGHT, self._sleep)
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
        """Carry the pair on a connection shared with the other pairs of this event loop
        (`_BinanceConnections`) until the pair is dropped: raises what dropped it."""
        await _BinanceConnections.of(self.ws_url).carry(_Route(self, sink))


class _RestBudget:
    """The request weight the depth snapshots of one event loop spend on one REST endpoint, as
    a bucket of `per_minute` that refills evenly. Binance allows 6,000 a minute per IP and bans
    an IP that goes on past its 429s: a connection of 100 pairs that drops (Binance ends every
    connection after 24 hours) would ask 100 snapshots of 250 at once. Each waits its turn."""

    _of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic):
        self.per_minute, self._clock = per_minute, clock
        self.tokens, self._at = per_minute, clock()

    @classmethod
    def of(cls, rest_url: str, per_minute: float) -> _RestBudget:
        by_url = cls._of.setdefault(asyncio.get_running_loop(), {})
        budget = by_url.get(rest_url)
        if budget is None or budget.per_minute != per_minute:
            budget = by_url[rest_url] = cls(per_minute)
        return budget

    async def spend(self, weight: float, sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        while True:
            now = self._clock()
            self.tokens = min(self.per_minute, self.tokens + (now - self._at) * self.per_minute / 60)
            self._at = now
            if self.tokens >= weight:
                self.tokens -= weight
                return
            await sleep((weight - self.tokens) * 60 / self.per_minute)


# Binance takes at most 1,024 streams on one connection and 5 messages a second from the
# client (SUBSCRIBE, UNSUBSCRIBE, pings and pongs alike); a pair is 3 streams.
PAIRS_PER_CONNECTION = 100
SUBSCRIBE_EVERY_S = 0.5  # at most one SUBSCRIBE and one UNSUBSCRIBE per connection this often


class _Route:
    """One pair on a shared connection: its codec fed the pair's messages as the connection
    reads them, its REST snapshots, its staleness. `done` ends with what drops the pair."""

    def __init__(self, feed: BinanceFeed, sink):
        self.feed, self.sink, self.codec = feed, sink, feed.codec
        name = self.codec.symbol.lower()
        self.streams = (f"{name}@depth@100ms", f"{name}@trade", f"{name}@bookTicker")
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.fetch: asyncio.Task | None = None
        self.started = False
        self.heard = time.monotonic()

    def start(self) -> None:
        """The exchange sends the pair's streams: sync its book."""
        if self.started or self.done.done():
            return
        self.started, self.heard = True, time.monotonic()
        self.feed._set(SYNCING, "waiting for the depth snapshot")
        self._fetch()

    def on_message(self, message: dict) -> None:
        codec = self.codec
        was_synced = self.feed._deliver(message, self.sink)
        if codec.synced or not self.started:
            return
        if codec.wants_snapshot and self.fetch is None and (was_synced or not codec.has_snapshot):
            feed = self.feed
            if was_synced:
                feed._status = dataclasses.replace(feed._status, resyncs=feed._status.resyncs + 1)
            feed._set(SYNCING, codec.wants_snapshot)
            self._fetch()

    def _fetch(self) -> None:
        self.fetch = asyncio.ensure_future(self.feed._snapshot(self.codec.symbol))
        self.fetch.add_done_callback(self._fetched)

    def _fetched(self, fetch: asyncio.Task) -> None:
        if fetch is not self.fetch or fetch.cancelled() or self.done.done():
            return
        self.fetch = None
        if fetch.exception() is not None:  # busy 5 times, unknown symbol, a failed request
            self.drop(fetch.exception())
            return
        try:
            for event in self.codec.on_snapshot(fetch.result()):
                self.sink(event)
        except Exception as exc:  # the pair fails with it, not the pairs beside it
            self.drop(exc)
            return
        if self.codec.synced:
            self.feed._set(LIVE)

    def drop(self, exc: BaseException | None) -> None:
        """End the pair's time on its connection with `exc` (None: cancelled, by its own task)."""
        if not self.done.done():
            if exc is None:
                self.done.cancel()
            else:
                self.done.set_exception(exc)
        if self.fetch is not None:
            self.fetch.cancel()
            self.fetch = None


class _BinanceConnections:
    """The connections of one event loop to one Binance stream endpoint. A pair joins the
    first open one with room (PAIRS_PER_CONNECTION) that does not carry its symbol, else a
    new one; one read then brings the messages of many pairs (the exchange writes each
    connection's messages together), where a socket per pair woke the loop for each:
    docs/DECISIONS.md, "Pairs share their exchange connections"."""

    _of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, ws_url: str):
        self.ws_url = ws_url
        self.connections: list[_BinanceConnection] = []

    @classmethod
    def of(cls, ws_url: str) -> _BinanceConnections:
        by_url = cls._of.setdefault(asyncio.get_running_loop(), {})
        if ws_url not in by_url:
            by_url[ws_url] = cls(ws_url)
        return by_url[ws_url]

    async def carry(self, route: _Route) -> None:
        self.connections = [c for c in self.connections if not c.ended]
        connection = next((c for c in self.connections if c.takes(route)), None)
        if connection is None:
            connection = _BinanceConnection(self.ws_url)
            self.connections.append(connection)
        connection.join(route)
        try:
            await route.done
        finally:
            route.drop(None)
            connection.leave(route)


class _BinanceConnection:
    """One websocket carrying the combined streams of its pairs.

    Rules:
    * It opens with the streams of the pairs waiting then in its URL; pairs joining later
      are subscribed (one SUBSCRIBE for all that joined within SUBSCRIBE_EVERY_S), and a
      pair is synced (its REST snapshot fetched) once the exchange has confirmed its streams.
    * A pair that leaves is unsubscribed (batched likewise, UNSUBSCRIBE before SUBSCRIBE, so
      a pair leaving and joining again starts from a fresh book); the last one to leave
      closes the connection.
    * A pair that heard no data message for its feed's `stale_after_s` is dropped ("no
      message for N s") and rejoins after its backoff. A dropped, refused or failed
      connection drops every pair it carried, each with the reason; what one pair's
      messages raise drops that pair alone.
    """

    def __init__(self, ws_url: str):
        self.ws_url = ws_url
        self.routes: dict[str, _Route] = {}  # by stream name
        self.carried: set[_Route] = set()
        self.waiting: list[_Route] = []  # joined, not subscribed yet
        self.subscribed: set[str] = set()  # the streams the exchange sends on this connection
        self.leaving: list[str] = []  # of them, those to unsubscribe
        self.asked: dict[int, list[_Route]] = {}  # SUBSCRIBE id -> its pairs
        self.ws: Any = None
        self.ended = False
        self._next_id = 0
        self._flush: asyncio.TimerHandle | None = None
        self._last_flush = 0.0
        self.task = asyncio.ensure_future(self._run())

    def takes(self, route: _Route) -> bool:
        return not self.ended and len(self.carried) < PAIRS_PER_CONNECTION and \
            not any(stream in self.routes for stream in route.streams)

    def join(self, route: _Route) -> None:
        for stream in route.streams:
            self.routes[stream] = route
        self.carried.add(route)
        self.waiting.append(route)
        if self.ws is not None:
            self._flush_soon()

    def leave(self, route: _Route) -> None:
        if route not in self.carried:
            return
        self.carried.discard(route)
        for stream in route.streams:
            del self.routes[stream]
        if route in self.waiting:
            self.waiting.remove(route)
        self.leaving.extend(stream for stream in route.streams if stream in self.subscribed)
        if not self.carried:
            self._end()
        elif self.leaving and self.ws is not None:
            self._flush_soon()

    def _end(self) -> None:
        self.ended = True
        if self._flush is not None:
            self._flush.cancel()
        if not self.task.done():
            self.task.cancel()

    def _drop_all(self, exc: BaseException) -> None:
        self.ended = True
        retry = isinstance(exc, RETRYABLE)
        reason = str(exc) or type(exc).__name__
        for route in list(self.carried):
            route.drop(_Retry(reason) if retry else exc)

    # -- subscriptions ----------------------------------------------------------------------
    def _flush_soon(self) -> None:
        if self._flush is None and not self.ended:
            wait = max(0.0, self._last_flush + SUBSCRIBE_EVERY_S - time.monotonic())
            self._flush = asyncio.get_running_loop().call_later(wait, self._send_subscriptions)

    def _send_subscriptions(self) -> None:
        self._flush, self._last_flush = None, time.monotonic()
        if self.ended or self.ws is None or self.ws.closed:
            return
        if self.leaving:
            leaving, self.leaving = self.leaving, []
            self.subscribed.difference_update(leaving)
            self._send("UNSUBSCRIBE", leaving)
        if self.waiting:
            waiting, self.waiting = self.waiting, []
            streams = [stream for route in waiting for stream in route.streams]
            self.subscribed.update(streams)
            self.asked[self._send("SUBSCRIBE", streams)] = waiting

    def _send(self, method: str, streams: list[str]) -> int:
        self._next_id += 1
        asyncio.ensure_future(self._say({"method": method, "params": streams, "id": self._next_id}))
        return self._next_id

    async def _say(self, request: dict) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):  # a closing socket: its reader says why
            await self.ws.send_str(json.dumps(request))

    def _answered(self, message: dict) -> None:
        routes = self.asked.pop(message.get("id"), [])
        error = message.get("error")
        for route in routes:
            if error is not None:
                route.drop(_Retry(f"subscription refused: {error}"))
            else:
                route.start()

    # -- the socket -------------------------------------------------------------------------
    async def _run(self) -> None:
        watchdog = None
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30, sock_connect=10))
        try:
            opening, self.waiting = self.waiting, []
            streams = [stream for route in opening for stream in route.streams]
            url = f"{self.ws_url}/stream?streams={'/'.join(streams)}"
            async with session.ws_connect(url, heartbeat=None, autoping=True, max_msg_size=0) as ws:
                self.ws = ws
                self.subscribed.update(streams)
                self.leaving.extend(stream for stream in streams if stream not in self.routes)  # left meanwhile
                for route in opening:
                    route.start()
                if self.waiting or self.leaving:
                    self._flush_soon()
                watchdog = asyncio.ensure_future(self._watch())
                await self._read(ws)
        except asyncio.CancelledError:
            self._drop_all(_Retry("connection closed"))
            raise
        except Exception as exc:  # every pair it carried is dropped with it
            self._drop_all(exc)
        finally:
            self.ended = True
            if watchdog is not None:
                watchdog.cancel()
            await session.close()

    async def _read(self, ws) -> None:
        routes, loads, monotonic = self.routes, orjson.loads, time.monotonic
        text, binary = aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY
        while True:
            message = await ws.receive()
            kind = message.type
            if kind is text or kind is binary:
                data = loads(message.data)
                route = routes.get(data.get("stream"))
                if route is not None:
                    route.heard = monotonic()
                    try:
                        route.on_message(data)
                    except Exception as exc:  # the pair fails with it, not the pairs beside it
                        route.drop(exc)
                elif "id" in data:
                    self._answered(data)
            elif kind in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                raise _Retry(f"connection closed by the exchange ({ws.close_code})")
            elif kind == aiohttp.WSMsgType.ERROR:
                raise _Retry(f"connection error: {ws.exception()}")

    async def _watch(self) -> None:
        """Drop the pairs that heard nothing for their feed's stale_after_s."""
        while not self.ended:
            every = min([1.0] + [route.feed.stale_after_s / 4 for route in self.carried])
            await asyncio.sleep(every)
            now = time.monotonic()
            for route in list(self.carried):
                if now - route.heard > route.feed.stale_after_s:
                    route.drop(_Retry(f"no message for {route.feed.stale_after_s:g} s"))


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

