"""Live exchange source over ccxt.pro websockets. Plain Python (no Django).

Two layers:

* Pure translation functions from ccxt's unified structures to our events
  (`trades_from_ccxt`, `book_from_ccxt`, `quote_from_ccxt`, plus `apply_book_event`, the
  book a consumer holds after applying our events). They do no I/O and are tested on
  recorded ccxt output.
* `ExchangeSource`, which runs `watch_trades`, `watch_order_book` and `watch_ticker`
  concurrently for one pair, converts what they return, hands every event to a sink in
  arrival order and keeps a bounded in-memory buffer that the `Source` protocol
  (`events` / `earliest_ms`) reads. A live websocket cannot replay: there is no history
  backfill, `events()` only sees what the stream has buffered.

Order books (see docs/EXCHANGE_ADAPTER.md)
------------------------------------------
`watch_order_book(symbol, limit=depth)` returns the whole current book each time, cut to
the best `depth` levels per side (ccxt really drops the levels beyond the limit). The
first book becomes a `BookSnapshot`; every later one becomes a `BookDelta` holding only
the levels that differ from the previous state:

* a level in the new view whose quantity differs (or that is new) -> (price, new qty);
* a level of the previous state missing from the new view is *removed* (qty 0) only if
  its price lies inside the range the new view covers, i.e. it is at or better than the
  view's worst price on that side (bids: price >= lowest visible bid; asks: price <=
  highest visible ask). Such a level would be visible if it still existed.
* a missing level priced beyond the view's worst price has only scrolled out of the
  truncated view (better levels pushed it down, or ccxt cut it off); it may still rest on
  the exchange, so it is not reported. Consumers keep it until it comes back into range
  (then it is updated or removed like any other level) or the next snapshot.
* a side that becomes empty has no visible range: every previous level of that side is
  reported removed (the visible book is empty; nothing can be "beyond" it).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections import deque
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping

import ccxt
from tenacity import AsyncRetrying, RetryCallState

from .backoff import backoff_wait
from .events import ASK, BID, BookDelta, BookSnapshot, Event, PairRef, Quote, Trade
from .order_book import levels_apply

logger = logging.getLogger(__name__)

Clock = Callable[[], int]
Level = tuple[float, float]

__all__ = [
    "ExchangeSource",
    "SourceFatalError",
    "apply_book_event",
    "book_from_ccxt",
    "ccxt_symbol",
    "quote_from_ccxt",
    "trades_from_ccxt",
]


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _ts_ms(struct: Mapping[str, Any], clock: Clock | None) -> int:
    """A ccxt structure's time: 'timestamp' (ms), else 'datetime' (ISO 8601), else the
    fallback clock (the local wall clock when none is given)."""
    ts = struct.get("timestamp")
    if ts is not None:
        return int(ts)
    text = struct.get("datetime")
    if text:
        try:
            parsed = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=timezone.utc)
            return int(round(parsed.timestamp() * 1000))
    return int((clock or _wall_clock_ms)())


def ccxt_symbol(pair: PairRef) -> str:
    """ccxt's unified spot symbol for a pair: "BASE/QUOTE"."""
    return f"{pair.base}/{pair.quote}"


# -- trades ------------------------------------------------------------------------------


def trades_from_ccxt(trades: Iterable[Mapping[str, Any]], *, clock: Clock | None = None) -> list[Trade]:
    """ccxt unified trades (timestamp, price, amount, side, id) -> `Trade`s, in the given
    order. Trades without a price, a positive amount or a buy/sell side cannot be
    normalised and are skipped (logged)."""
    out: list[Trade] = []
    for raw in trades or ():
        price, amount, side = raw.get("price"), raw.get("amount"), raw.get("side")
        if price is None or amount is None or side not in ("buy", "sell"):
            logger.warning("skipping ccxt trade without price/amount/side: id=%s side=%r", raw.get("id"), side)
            continue
        qty = float(amount)
        if qty <= 0:
            logger.warning("skipping ccxt trade with non-positive amount: id=%s", raw.get("id"))
            continue
        trade_id = raw.get("id")
        out.append(Trade(ts_ms=_ts_ms(raw, clock), price=float(price), qty=qty, side=side,
                         trade_id=None if trade_id is None else str(trade_id)))
    return out


# -- order books ------------------------------------------------------------------------


def _side_levels(side: Any, *, descending: bool, depth: int | None = None) -> list[Level]:
    """A book side as sorted (price, qty) pairs, best first, zero levels dropped. Accepts
    ccxt's lists of [price, amount(, ...)] or a {price: qty} mapping."""
    if not side:
        return []
    items = side.items() if isinstance(side, Mapping) else ((lvl[0], lvl[1]) for lvl in side)
    levels: dict[float, float] = {}
    for price, qty in items:
        if price is None or qty is None:
            continue
        levels[float(price)] = float(qty)
    ordered = sorted(((p, q) for p, q in levels.items() if q > 0), key=lambda lvl: lvl[0], reverse=descending)
    return ordered[:depth] if depth is not None else ordered


def _side_changes(previous: list[Level], current: list[Level], side: str) -> tuple[Level, ...]:
    before = dict(previous)
    now = dict(current)
    changes: dict[float, float] = {p: q for p, q in current if before.get(p) != q}
    if current:
        worst = current[-1][0]
        for price in before:
            if price in now:
                continue
            in_view = price >= worst if side == BID else price <= worst
            if in_view:  # inside the visible range and gone: removed
                changes[price] = 0.0
            # else: beyond the view's worst price, it only scrolled out; not reported
    else:
        for price in before:
            changes[price] = 0.0
    return tuple(sorted(changes.items(), key=lambda lvl: lvl[0], reverse=(side == BID)))


def book_from_ccxt(orderbook: Mapping[str, Any], previous: Mapping[str, Any] | None = None, *,
                   depth: int | None = None, clock: Clock | None = None) -> BookSnapshot | BookDelta:
    """A ccxt order book (as `watch_order_book` returns it: 'bids'/'asks' lists of
    [price, amount], 'timestamp' possibly None) -> our book event.

    `previous` None gives a `BookSnapshot` of the view. Otherwise `previous` is the book
    to diff against, ccxt-shaped ({'bids': [[p, q], ...], 'asks': ...}, or {price: qty}
    mappings): either the previous ccxt book, or better the consumer's book as returned
    by `apply_book_event`, which also remembers levels that scrolled out of view. The
    result is a `BookDelta` of only the changed levels (see the module docstring for how
    a removed level is told from one that scrolled out); it is empty when nothing changed.

    `depth` cuts the view to the best `depth` levels first (for exchanges that send more
    than asked). The time is 'timestamp', else 'datetime', else `clock()`."""
    ts = _ts_ms(orderbook, clock)
    bids = _side_levels(orderbook.get("bids"), descending=True, depth=depth)
    asks = _side_levels(orderbook.get("asks"), descending=False, depth=depth)
    if previous is None:
        return BookSnapshot(ts_ms=ts, bids=tuple(bids), asks=tuple(asks))
    prev_bids = _side_levels(previous.get("bids"), descending=True)
    prev_asks = _side_levels(previous.get("asks"), descending=False)
    return BookDelta(ts_ms=ts, bids=_side_changes(prev_bids, bids, BID), asks=_side_changes(prev_asks, asks, ASK))


def apply_book_event(state: Mapping[str, Any] | None, event: BookSnapshot | BookDelta) -> dict[str, Any]:
    """The book a consumer holds after applying `event` to `state` (None = empty), in
    ccxt shape: {'bids': [[p, q], ...] best first, 'asks': [...], 'timestamp': ts}.
    A snapshot replaces the book; a delta sets each listed level, qty 0 removing it."""
    if isinstance(event, BookSnapshot) or state is None:
        bids: dict[float, float] = {}
        asks: dict[float, float] = {}
    else:
        bids = dict(_side_levels(state.get("bids"), descending=True))
        asks = dict(_side_levels(state.get("asks"), descending=False))
    levels_apply(bids, event.bids)
    levels_apply(asks, event.asks)
    return {
        "bids": [[p, q] for p, q in sorted(bids.items(), reverse=True)],
        "asks": [[p, q] for p, q in sorted(asks.items())],
        "timestamp": event.ts_ms,
    }


def _beyond_view(state: Mapping[str, Any], view: BookSnapshot) -> int:
    """How many levels of the consumer's book lie beyond the view's worst price (levels
    that scrolled out and are kept stale), the larger count of the two sides."""
    counts = []
    for side, levels, beyond in ((state["bids"], view.bids, lambda p, w: p < w),
                                 (state["asks"], view.asks, lambda p, w: p > w)):
        worst = levels[-1][0] if levels else None
        counts.append(0 if worst is None else sum(1 for p, _ in side if beyond(p, worst)))
    return max(counts)


# -- quotes -----------------------------------------------------------------------------


def quote_from_ccxt(ticker: Mapping[str, Any], *, clock: Clock | None = None) -> Quote | None:
    """A ccxt ticker (bid, bidVolume, ask, askVolume, timestamp) -> `Quote`, or None when
    the ticker carries no usable best bid and ask (e.g. a mini ticker, or an empty side).
    A missing bidVolume/askVolume becomes 0.0 (the exchange did not report the size)."""
    if not ticker:
        return None
    bid, ask = ticker.get("bid"), ticker.get("ask")
    if bid is None or ask is None:
        return None
    bid, ask = float(bid), float(ask)
    if bid <= 0 or ask <= 0:
        return None
    bid_qty, ask_qty = ticker.get("bidVolume"), ticker.get("askVolume")
    return Quote(ts_ms=_ts_ms(ticker, clock), bid_price=bid, bid_qty=float(bid_qty or 0.0),
                 ask_price=ask, ask_qty=float(ask_qty or 0.0))


# -- the live source ----------------------------------------------------------------------


class SourceFatalError(Exception):
    """The stream cannot go on and retrying will not help (unknown symbol or exchange,
    rejected credentials, unsupported channel, exchange unavailable after N tries)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


Sink = Callable[[Event], Any]


class ExchangeSource:
    """A live ccxt.pro feed for pairs on one exchange.

    `await stream(pair, sink)` runs until `close()` (returns), a fatal error (raises
    `SourceFatalError`) or cancellation. Every event also goes into a per-pair bounded
    buffer (`buffer_size` events) that `events()` / `earliest_ms()` read: that is the
    Source protocol for a live exchange, best effort, with no history before the stream
    started (public websockets do not replay).

    Reconnection: on `ccxt.NetworkError` a channel waits `backoff_base * 2**(n-1)`
    seconds (capped at `backoff_max`, minus up to `backoff_jitter` of it at random) and
    calls the watch method again, which makes ccxt reconnect. `n` counts consecutive
    failures of that channel and resets on the next message. `ccxt.ExchangeNotAvailable`
    (and `OnMaintenance`) becomes fatal after `max_unavailable_retries` consecutive tries;
    other network errors are retried forever unless `max_network_retries` is set. ccxt
    also reports a failed REST request (e.g. loading the market list while the exchange is
    unreachable) as ExchangeNotAvailable, so the default 10 tries give up after about 2.5
    minutes without the exchange. After a book reconnect the next book is sent as a fresh
    `BookSnapshot`, and so is a book whose consumer copy holds more than `depth` stale
    out-of-view levels on a side (a periodic resync).
    Anything else ccxt raises (BadSymbol, AuthenticationError, NotSupported, other
    ExchangeErrors) is fatal at once. Exceptions raised by the sink propagate unchanged.

    All pairs streamed by one source share one ccxt client, made on first use (by
    `client_factory()` or `ccxt.pro.<exchange_id>({'enableRateLimit': True})`) and closed
    when the last stream ends or on `close()`.
    """

    name = "exchange"

    def __init__(self, exchange_id: str, *, depth: int = 50,
                 client_factory: Callable[[], Any] | None = None,
                 buffer_size: int = 100_000,
                 backoff_base: float = 0.5, backoff_max: float = 30.0, backoff_jitter: float = 0.2,
                 max_unavailable_retries: int = 10, max_network_retries: int | None = None,
                 clock: Clock | None = None,
                 sleep: Callable[[float], Awaitable[Any]] | None = None):
        if depth is not None and depth < 1:
            raise ValueError("depth must be a positive number of levels")
        self.exchange_id = exchange_id
        self.depth = depth
        self.buffer_size = buffer_size
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.backoff_jitter = backoff_jitter
        self.max_unavailable_retries = max_unavailable_retries
        self.max_network_retries = max_network_retries
        self._client_factory = client_factory
        self._clock = clock or _wall_clock_ms
        self._sleep = sleep
        self._buffers: dict[PairRef, deque[Event]] = {}
        self._lock = threading.Lock()
        self._client: Any = None  # one ccxt client shared by every pair streamed
        self._client_users = 0
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    # -- Source protocol (best effort, from the buffer) ---------------------------------

    def events(self, pair: PairRef, start_ms: int, end_ms: int) -> Iterator[Event]:
        """Buffered events with start_ms <= ts_ms < end_ms, in time order (stable for
        equal times, i.e. arrival order). Only what the running stream has buffered."""
        with self._lock:
            buffered = list(self._buffers.get(pair, ()))
        selected = [e for e in buffered if start_ms <= e.ts_ms < end_ms]
        selected.sort(key=lambda e: e.ts_ms)
        return iter(selected)

    def earliest_ms(self, pair: PairRef) -> int | None:
        """The oldest buffered event time; with nothing buffered yet, now (a live source
        has nothing before the moment it connected)."""
        with self._lock:
            buffered = self._buffers.get(pair)
            if buffered:
                return min(e.ts_ms for e in buffered)
        return self._clock()

    # -- streaming ---------------------------------------------------------------------

    def _make_client(self) -> Any:
        if self._client_factory is not None:
            return self._client_factory()
        import ccxt.pro

        cls = getattr(ccxt.pro, self.exchange_id, None)
        if cls is None:
            raise SourceFatalError(f"ccxt.pro has no exchange {self.exchange_id!r}")
        return cls({"enableRateLimit": True})

    def _acquire_client(self) -> Any:
        """The shared client (ccxt.pro multiplexes the pairs' subscriptions over its
        connections and loads the markets once), made on first use."""
        if self._client is None:
            self._client = self._make_client()
        self._client_users += 1
        return self._client

    async def _release_client(self, client: Any) -> None:
        if client is not self._client:
            return  # already closed by close()
        self._client_users -= 1
        if self._client_users <= 0:
            self._client, self._client_users = None, 0
            await self._close_client(client)

    async def stream(self, pair: PairRef, sink: Sink) -> None:
        """Stream trades, book and quotes of `pair` into `sink(event)` (a plain or async
        callable), in arrival order, until `close()`. Raises `SourceFatalError`."""
        if self._closed:
            raise SourceFatalError("source is closed")
        client = self._acquire_client()
        symbol = ccxt_symbol(pair)
        with self._lock:
            buffer = self._buffers.setdefault(pair, deque(maxlen=self.buffer_size))
        sink_lock = asyncio.Lock()

        async def emit(event: Event) -> None:
            with self._lock:
                buffer.append(event)
            result = sink(event)
            if inspect.isawaitable(result):
                # hold arrival order across channels while an async sink awaits
                async with sink_lock:
                    await result

        has = getattr(client, "has", None) or {}
        runners = []
        if has.get("watchTrades") is not False:
            runners.append(self._trades_channel(client, symbol, emit))
        if has.get("watchOrderBook") is not False:
            runners.append(self._book_channel(client, symbol, emit))
        if has.get("watchTicker") is not False:
            runners.append(self._ticker_channel(client, symbol, emit))
        if not runners:
            await self._release_client(client)
            raise SourceFatalError(f"{self.exchange_id} supports none of watchTrades/watchOrderBook/watchTicker")

        tasks = [asyncio.create_task(r) for r in runners]
        self._tasks.update(tasks)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
            await self._release_client(client)

    async def close(self) -> None:
        """Stop every running stream (they return) and close the ccxt client."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        client, self._client, self._client_users = self._client, None, 0
        if client is not None:
            await self._close_client(client)

    @staticmethod
    async def _close_client(client: Any) -> None:
        close = getattr(client, "close", None)
        if close is None:
            return
        try:
            result = close()
            if inspect.isawaitable(result):
                await result
        except Exception:  # closing is best effort
            logger.debug("error closing ccxt client", exc_info=True)

    async def _channel(self, what: str, symbol: str, watch: Callable[[], Awaitable[Any]],
                       handle: Callable[[Any], Awaitable[None]],
                       on_reconnect: Callable[[], None] | None = None) -> None:
        """One watch loop: call `watch`, `handle` what it returns; back off and retry on
        network errors (tenacity: one attempt lasts until `watch` fails, and the attempt
        count starts again at each message, so it counts consecutive failures); turn
        everything else ccxt raises into SourceFatalError."""
        where = f"{self.exchange_id} {symbol} {what}"
        watching = False  # a network error is retried only when `watch` raised it
        failures = unavailable = 0  # consecutive network errors, of them ExchangeNotAvailable

        def retry(state: RetryCallState) -> bool:
            nonlocal failures, unavailable
            exc = state.outcome.exception()
            if not (watching and isinstance(exc, ccxt.NetworkError)):
                return False
            failures = state.attempt_number
            unavailable = unavailable + 1 if isinstance(exc, ccxt.ExchangeNotAvailable) else 0
            return True

        def give_up(state: RetryCallState) -> bool:
            return (unavailable > self.max_unavailable_retries
                    or (self.max_network_retries is not None and state.attempt_number > self.max_network_retries))

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception()
            logger.warning("%s: %s: %s; reconnecting (try %d)", where, type(exc).__name__, exc, state.attempt_number)
            if on_reconnect is not None:
                on_reconnect()

        retrying = AsyncRetrying(retry=retry, stop=give_up, before_sleep=before_sleep, reraise=True,
                                 wait=backoff_wait(self.backoff_base, self.backoff_max, self.backoff_jitter),
                                 sleep=self._sleep or asyncio.sleep)
        try:
            async for attempt in retrying:
                with attempt:
                    state = attempt.retry_state
                    while not self._closed:
                        watching = True
                        try:
                            message = await watch()
                        except ccxt.ExchangeClosedByUser:
                            return
                        except ccxt.NetworkError:
                            raise
                        except ccxt.BaseError as exc:  # BadSymbol, AuthenticationError, NotSupported, ...
                            raise SourceFatalError(f"{where}: {type(exc).__name__}: {exc}") from exc
                        watching = False
                        if state.attempt_number != 1:  # the next failure is the first
                            state.attempt_number, unavailable = 1, 0
                        await handle(message)
        except ccxt.NetworkError as exc:
            if not watching:
                raise
            if unavailable > self.max_unavailable_retries:
                raise SourceFatalError(f"{where}: exchange not available after {unavailable} tries: "
                                       f"{type(exc).__name__}: {exc}") from exc
            raise SourceFatalError(f"{where}: {failures} network failures in a row: "
                                   f"{type(exc).__name__}: {exc}") from exc

    async def _trades_channel(self, client: Any, symbol: str, emit) -> None:
        seen: deque[str] = deque(maxlen=10_000)
        seen_set: set[str] = set()

        async def handle(trades) -> None:
            for trade in trades_from_ccxt(trades, clock=self._clock):
                if trade.trade_id is not None:  # exchanges may resend trades after a reconnect
                    if trade.trade_id in seen_set:
                        continue
                    if len(seen) == seen.maxlen:
                        seen_set.discard(seen[0])
                    seen.append(trade.trade_id)
                    seen_set.add(trade.trade_id)
                await emit(trade)

        await self._channel("trades", symbol, lambda: client.watch_trades(symbol), handle)

    async def _book_channel(self, client: Any, symbol: str, emit) -> None:
        state: dict[str, Any] | None = None

        def resync() -> None:
            nonlocal state
            state = None

        async def handle(orderbook) -> None:
            nonlocal state
            event = book_from_ccxt(orderbook, state, depth=self.depth, clock=self._clock)
            if isinstance(event, BookDelta):
                if not event.bids and not event.asks:
                    return
                new_state = apply_book_event(state, event)
                view = book_from_ccxt(orderbook, None, depth=self.depth, clock=lambda: event.ts_ms)
                if _beyond_view(new_state, view) > (self.depth or 50):
                    # too many stale out-of-view levels kept: resync with a snapshot
                    event, new_state = view, apply_book_event(None, view)
                state = new_state
            else:
                state = apply_book_event(None, event)
            await emit(event)

        await self._channel("order book", symbol,
                            lambda: client.watch_order_book(symbol, limit=self.depth), handle, resync)

    async def _ticker_channel(self, client: Any, symbol: str, emit) -> None:
        async def handle(ticker) -> None:
            quote = quote_from_ccxt(ticker, clock=self._clock)
            if quote is not None:
                await emit(quote)

        await self._channel("ticker", symbol, lambda: client.watch_ticker(symbol), handle)
