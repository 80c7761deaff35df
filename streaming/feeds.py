"""Live exchange feeds inside the worker that owns a pair.

The worker holding a pair's lease reads it through `LiveExchangeSource`, which starts the
exchange's feed (market/sources/venues: Binance and Coinbase raw streams with an exact
book; other ccxt exchanges through market/sources/exchange.py) on one asyncio thread per
process and buffers what it sends. Ingestion then reads windows of that buffer as it reads
any other source.

Rules (what ingestion can rely on):

* Arrival is kept: a window is the buffered events with start <= ts < end, ordered by
  (ts, arrival). An event that arrives after its second was closed (read by the tick
  that writes it) is late: it is moved to the first moment not closed yet (counted in
  `late_events`), never dropped, so the book stays exact.
* Ingestion also reads a second in parts ahead of its tick (`closing=False`, never closer
  to now than the lag). An event arriving after such a read passed its time, in a second
  not closed yet, keeps its time: the next read that would skip it raises `ReadBehind`
  (counted in `rereads`), and ingestion reads the second again from the book checkpoint.
  Reading ahead never changes a bar.
* The feed vouches for time: while it is live, up to now minus the lag (in exchange
  time, through the measured clock offset); while it is not, the time is frozen where it
  was. Ingestion never closes a second past that point.
  When the feed stops being live it adds a BookLost at the vouched point: bars after it
  have no book sample until the feed's next BookSnapshot.
* The buffer keeps every event since the last book checkpoint, so a step that failed, or
  a new task in the same process, rebuilds the builder from the checkpoint exactly.
  `covers_from_ms` says from when the buffer is complete: a checkpoint older than that
  (another process ran the pair, or this one restarted) cannot be replayed here, and
  ingestion skips to where this feed's data starts instead of inventing the seconds.
* Heartbeats come from real messages only (`last_message_ms`, wall clock).
* A feed nobody read for FEED_IDLE_SECONDS is closed (its worker lost the pair or ended).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections import deque
from typing import Any

from django.conf import settings

from market.sources.events import BookLost, BookSnapshot, Event, PairRef

logger = logging.getLogger(__name__)

LIVE = "live"


class ReadBehind(Exception):
    """An event arrived after a read ahead passed its time, in a second not closed yet:
    what was read since is to be read again, from before it."""


def _wall_ms() -> int:
    return int(time.time() * 1000)


class PairFeed:
    """One pair's running feed and its buffer. The feed's thread appends; the ingestion
    thread reads and trims. Everything shared is touched under the lock."""

    OFFSET_SAMPLES = 256

    def __init__(self, ref: PairRef, lag_ms: int):
        self.ref = ref
        self.lag_ms = lag_ms
        self._lock = threading.Lock()
        self._events: list[tuple] = []  # (ts_ms, arrival, event), in arrival order
        # Where the next window's scan may start: every event before this index has a time
        # before `_scanned_to_ms` (read already), since later arrivals are never earlier
        # than the seconds read (they move past them). A step reads only the last seconds,
        # not the whole buffer kept since the book checkpoint.
        self._scan_from = 0
        self._scanned_to_ms = 0
        self.closed_ms = 0  # the end of the last closing read: earlier times are written
        self.read_ms = 0  # the end of the last read, closing or ahead
        self._unplaced_from: int | None = None  # an event a read ahead passed before it came
        self._arrival = 0
        self._offsets: deque[int] = deque(maxlen=self.OFFSET_SAMPLES)  # wall - exchange ms
        self.last_event_ms: int | None = None
        self.last_message_ms: int | None = None
        self.vouched_ms: int | None = None
        self.covers_from_ms: int | None = None
        self.synced_from_ms: int | None = None  # the time of the feed's first book snapshot
        self.live = False
        self.status: Any = None
        self.fatal: BaseException | None = None
        self.finished = False
        self.late_events = 0
        self.rereads = 0
        self.last_read = time.monotonic()
        self.task: asyncio.Task | None = None
        self.feed: Any = None

    # -- the feed's side (event-loop thread) -----------------------------------------------
    def sink(self, event: Event) -> None:
        now = _wall_ms()
        with self._lock:
            self._arrival += 1
            ts = event.ts_ms
            self._offsets.append(now - ts)
            if ts < self.closed_ms:  # its second is written: it counts at the first moment not closed
                ts = self.closed_ms
                event = dataclasses.replace(event, ts_ms=ts)
                self.late_events += 1
            elif ts < self.read_ms and (self._unplaced_from is None or ts < self._unplaced_from):
                self._unplaced_from = ts
            self._events.append((ts, self._arrival, event))
            if self.last_event_ms is None or ts > self.last_event_ms:
                self.last_event_ms = ts
            self.last_message_ms = now
            if self.covers_from_ms is None:
                self.covers_from_ms = ts
            if type(event) is BookSnapshot:
                self.live = True
                if self.synced_from_ms is None:
                    self.synced_from_ms = ts

    def on_status(self, status: Any) -> None:
        with self._lock:
            self.status = status
            live = getattr(status, "state", LIVE) == LIVE
            if self.live and not live:
                lost_at = max(self.vouched_ms or 0, self.last_event_ms or 0)
                if lost_at:
                    self._arrival += 1
                    reason = getattr(status, "reason", "") or getattr(status, "state", "")
                    self._events.append((lost_at, self._arrival, BookLost(lost_at, reason)))
            if not live:
                self.live = False
                self.synced_from_ms = None  # complete again only from its next book snapshot
            message_ms = getattr(status, "last_message_ms", None)
            if message_ms and (self.last_message_ms is None or message_ms > self.last_message_ms):
                self.last_message_ms = message_ms

    # -- the ingestion side ----------------------------------------------------------------
    def window_end(self, now_ms: int) -> int | None:
        """The time up to which the feed vouches for its data (None: nothing yet)."""
        with self._lock:
            self.last_read = time.monotonic()
            if self.fatal is not None:
                raise self.fatal
            if self.last_event_ms is None:
                return None
            if self.live:
                # now in the exchange's clock (the smallest delay seen is the clock offset),
                # less the lag that lets the streams' small inversions arrive in time
                offset = min(self._offsets) if self._offsets else 0
                self.vouched_ms = max(self.vouched_ms or 0, now_ms - offset - self.lag_ms)
            return self.vouched_ms

    def events(self, start_ms: int, end_ms: int, *, closing: bool = True) -> list[Event]:
        """The buffered events with start_ms <= ts < end_ms in (time, arrival) order. A
        closing read closes the seconds before end_ms: later arrivals move past them. A read
        ahead (closing=False) closes nothing. ReadBehind: an event came before start_ms after
        a read passed its time; the reader's earlier reads missed it."""
        with self._lock:
            self.last_read = time.monotonic()
            if self.fatal is not None:
                raise self.fatal
            unplaced = self._unplaced_from
            if unplaced is not None:
                if start_ms > unplaced:
                    self.rereads += 1
                    self._unplaced_from = None  # the reader starts again from before it
                    raise ReadBehind(f"{self.ref}: an event at {unplaced} came after a read ahead passed it")
                if unplaced < end_ms:
                    self._unplaced_from = None  # this read holds it
            if closing:
                self.closed_ms = max(self.closed_ms, end_ms)
            self.read_ms = max(self.read_ms, end_ms)
            events = self._events
            first = self._scan_from if start_ms >= self._scanned_to_ms else 0
            picked = [item for item in events[first:] if start_ms <= item[0] < end_ms] if first else \
                [item for item in events if start_ms <= item[0] < end_ms]
            if end_ms >= self._scanned_to_ms:
                later = first
                while later < len(events) and events[later][0] < end_ms:
                    later += 1
                self._scan_from, self._scanned_to_ms = later, end_ms
        picked.sort(key=lambda item: (item[0], item[1]))
        return [item[2] for item in picked]

    def trim_before(self, ts_ms: int) -> None:
        """Forget the events a book checkpoint at ts_ms made unnecessary."""
        with self._lock:
            self._events = [item for item in self._events if item[0] >= ts_ms]
            self._scan_from = 0
            if self.covers_from_ms is not None:
                self.covers_from_ms = max(self.covers_from_ms, ts_ms)

    def complete_from_ms(self) -> int | None:
        """From when this feed holds every event another process's feed of the pair holds:
        the second after the one holding its first book snapshot, and one more for events the
        exchange stamped before they were sent (None: not synced yet). A process taking the
        pair over from another waits until the other's cursor reaches it."""
        with self._lock:
            self.last_read = time.monotonic()
            if self.fatal is not None:
                raise self.fatal
            if self.synced_from_ms is None:
                return None
            return self.synced_from_ms - self.synced_from_ms % 1000 + 2000

    def covers(self, ts_ms: int) -> bool:
        with self._lock:
            return self.covers_from_ms is not None and self.covers_from_ms <= ts_ms

    def signals(self) -> dict:
        with self._lock:
            status = self.status
            out = {"state": getattr(status, "state", LIVE if self.live else "connecting"),
                   "late_events": self.late_events, "rereads": self.rereads}
            for name in ("reason", "since_ms", "disconnects", "recent_disconnects", "degraded", "resyncs",
                         "trades_missed", "synced_at_ms", "snapshot_reach_pct"):
                value = getattr(status, name, None)
                if value not in (None, ""):
                    out[name] = value
            if self.fatal is not None:
                out["state"] = "failed"
                out["reason"] = getattr(self.fatal, "reason", str(self.fatal))
            return out


class FeedRunner:
    """The process's asyncio thread running every live feed this process reads."""

    _instance: FeedRunner | None = None
    _instance_lock = threading.Lock()

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.feeds: dict[PairRef, PairFeed] = {}
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="exchange-feeds", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> FeedRunner:
        with cls._instance_lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance

    @classmethod
    def shutdown(cls, timeout: float = 5.0) -> None:
        with cls._instance_lock:
            runner, cls._instance = cls._instance, None
        if runner is not None:
            runner.stop_all(timeout)
            runner.loop.call_soon_threadsafe(runner.loop.stop)
            runner.thread.join(timeout)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_later(1.0, self._close_idle)
        self.loop.run_forever()

    def pair_feed(self, ref: PairRef, make_feed) -> PairFeed:
        """The running feed of `ref`, started with make_feed() when there is none."""
        with self._lock:
            feed = self.feeds.get(ref)
            if feed is not None and not feed.finished:
                return feed
            feed = self.feeds[ref] = PairFeed(ref, settings.INGESTION_LAG_MS)
        try:
            asyncio.run_coroutine_threadsafe(self._start(feed, make_feed), self.loop).result(10)
        except BaseException:
            with self._lock:
                self.feeds.pop(ref, None)
            raise
        return feed

    async def _start(self, pair_feed: PairFeed, make_feed) -> None:
        pair_feed.feed = make_feed()
        pair_feed.task = asyncio.ensure_future(self._stream(pair_feed))

    async def _stream(self, pair_feed: PairFeed) -> None:
        try:
            await pair_feed.feed.stream(pair_feed.ref, pair_feed.sink, pair_feed.on_status)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # SourceFatalError and anything unexpected: the pair fails with it
            logger.warning("live feed of %s ended: %s", pair_feed.ref, exc)
            pair_feed.fatal = exc
        finally:
            pair_feed.finished = pair_feed.fatal is None
            try:
                await pair_feed.feed.close()
            except Exception:
                logger.debug("closing the feed of %s failed", pair_feed.ref, exc_info=True)

    def stop(self, ref: PairRef) -> None:
        with self._lock:
            feed = self.feeds.pop(ref, None)
        if feed is not None and feed.task is not None:
            self.loop.call_soon_threadsafe(feed.task.cancel)

    def stop_all(self, timeout: float = 5.0) -> None:
        """Cancel every feed and wait (up to timeout) for them to close their connections."""
        with self._lock:
            feeds, self.feeds = list(self.feeds.values()), {}
        tasks = [feed.task for feed in feeds if feed.task is not None]

        async def cancelled():
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if tasks:
            try:
                asyncio.run_coroutine_threadsafe(cancelled(), self.loop).result(timeout)
            except Exception:  # a feed that does not close in time is left to the process exit
                logger.warning("live feeds did not close within %s s", timeout)

    def _close_idle(self) -> None:
        idle_after = settings.FEED_IDLE_SECONDS
        now = time.monotonic()
        with self._lock:
            idle = [ref for ref, feed in self.feeds.items() if now - feed.last_read > idle_after]
        for ref in idle:
            logger.info("closing the live feed of %s: nobody reads it", ref)
            self.stop(ref)
        self.loop.call_later(1.0, self._close_idle)


class LiveExchangeSource:
    """A live exchange as ingestion sees it (see the module docstring)."""

    name = "exchange"
    live = True

    def __init__(self, ccxt_id: str):
        self.ccxt_id = ccxt_id

    def make_feed(self):
        from market.sources import venues

        venue = self.ccxt_id if self.ccxt_id in venues.VENUES else None
        if venue is None:
            from market.sources.exchange import ExchangeSource

            return _CcxtFeed(ExchangeSource(self.ccxt_id))
        urls = {"binance": (settings.BINANCE_WS_URL, settings.BINANCE_REST_URL),
                "coinbase": (settings.COINBASE_WS_URL, settings.COINBASE_REST_URL)}.get(venue, ("", ""))
        options = {"rest_weight_per_minute": settings.BINANCE_REST_WEIGHT_PER_MINUTE} if venue == "binance" else {}
        return venues.feed_for(venue, ws_url=urls[0] or None, rest_url=urls[1] or None,
                               stale_after_s=settings.FEED_STALE_SECONDS, **options)

    def feed(self, ref: PairRef) -> PairFeed:
        return FeedRunner.get().pair_feed(ref, self.make_feed)

    # -- what ingestion reads ---------------------------------------------------------------
    def window_end(self, ref: PairRef, now_ms: int) -> int | None:
        return self.feed(ref).window_end(now_ms)

    def events(self, ref: PairRef, start_ms: int, end_ms: int, *, closing: bool = True):
        return iter(self.feed(ref).events(start_ms, end_ms, closing=closing))

    def earliest_ms(self, ref: PairRef) -> int | None:
        return self.feed(ref).covers_from_ms

    def covers(self, ref: PairRef, ts_ms: int) -> bool:
        return self.feed(ref).covers(ts_ms)

    def complete_from_ms(self, ref: PairRef) -> int | None:
        return self.feed(ref).complete_from_ms()

    def release(self, ref: PairRef) -> None:
        """This process no longer ingests the pair: close its feed now."""
        runner = FeedRunner._instance
        if runner is not None:
            runner.stop(ref)

    def trim_before(self, ref: PairRef, ts_ms: int) -> None:
        self.feed(ref).trim_before(ts_ms)

    def heartbeat_ms(self, ref: PairRef) -> int | None:
        return self.feed(ref).last_message_ms

    def signals(self, ref: PairRef) -> dict:
        return self.feed(ref).signals()


class _CcxtFeed:
    """ccxt.pro's unified watchers (exchanges without a native venue feed) in the feed
    interface. Their books are the library's top-N view, not the exchange's whole book:
    docs/EXCHANGE_ADAPTER.md says what that costs."""

    def __init__(self, source):
        self.source = source

    async def stream(self, pair, sink, on_status) -> None:
        await self.source.stream(pair, sink)

    async def close(self) -> None:
        await self.source.close()
