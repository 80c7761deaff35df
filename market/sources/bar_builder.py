"""Turn a time-ordered stream of normalised events into 1-second `Bar`s. Plain Python.

    builder = BarBuilder(pair, start_ms=cursor)     # bars start at floor(cursor)
    builder.feed_many(source.events(pair, warmup_ms, now_ms))
    bars = builder.flush(now_ms)                    # every complete second < now_ms

Rules (what the rest of the service can rely on):

* One bar per second (or per `interval_ms`), with no gaps: from the second of the first
  event (or `start_ms` when given) every second is emitted, also seconds without any event.
  A bar with no trades has trade_count 0 and open/high/low/close None.
* Bars are emitted only when complete: a second closes when an event of a later second
  arrives or when `flush(until_ms)` says time has passed. `flush(until_ms)` closes every
  second that ends at or before `until_ms` (a partial second stays open).
* Book: tracked by price level from BookSnapshot (replaces the book) and BookDelta (qty 0
  removes a level). BookLost (the feed lost messages) drops the book: seconds that end
  before the next BookSnapshot carry no sample, exactly like seconds before the first
  book event, and the quotes of the second so far and the carried quote are forgotten
  with it (a second that loses and regains its book closes on the new book's quote). At the end of every second ONE sample is taken, the book as it stands
  then: within `depth_band` (1 %) of mid on each side the sum of quantity, of price*qty
  and the number of levels. Mid is the midpoint of the book's best bid and ask (the last
  quote's mid when a side is empty). Seconds before any book event carry no sample
  (book_samples 0), so averages are not diluted by an unknown book.
* Quotes: a second that contains Quote events uses them (count, spread statistics, last
  bid/ask). A second without Quote events uses the quotes derived from the book: one per
  event that changed the best bid/ask price or quantity. So sources without a quote
  stream still get spread fields; the choice is per second, hence restart-safe. Force
  one way with quotes="events" or quotes="book".
  bid_price/ask_price of a bar are the quote state at the end of the bar, carried over
  seconds without quote updates (quote_count 0). Note that `bars.merge` only copies
  bid/ask from bars with quote updates, so a roll-up of a period without any quote update
  has bid/ask None.
* Events before `start_ms` update the book and the quote state but make no bars (warm-up:
  feed from the last snapshot before the cursor).
* `state()` at a flush point is everything a later builder needs (the book, the carried
  quote state, the open second): `BarBuilder.restore(pair, state)` then fed the same
  events gives the same bars as the builder that was saved. An event earlier than the open second
  raises ValueError (events must come in time order).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable

from market.bars import Bar
import orjson

from market.sources.events import BookDelta, BookLost, BookSnapshot, PairRef, Quote, Trade
from market.sources.order_book import level_set, side_from_levels

SECOND_MS = 1_000


class BarBuilder:
    """Consume events in time order, emit completed bars (see the module docstring)."""

    def __init__(
        self,
        pair_ref: PairRef,
        depth_band: float = 0.01,
        *,
        interval_ms: int = SECOND_MS,
        start_ms: int | None = None,
        quotes: str = "auto",
    ) -> None:
        if interval_ms <= 0 or interval_ms % SECOND_MS:
            raise ValueError("interval_ms must be a positive multiple of 1000")
        if quotes not in ("auto", "events", "book"):
            raise ValueError("quotes must be 'auto', 'events' or 'book'")
        if not 0 < depth_band < 1:
            raise ValueError("depth_band must be in (0, 1)")
        self.pair = pair_ref
        self.depth_band = depth_band
        self.interval_ms = interval_ms
        self.start_ms = start_ms
        self.quotes = quotes
        self._use_explicit = quotes != "book"
        self._use_derived = quotes != "events"
        # order book: dict price -> qty, plus the prices kept sorted ascending
        self._bids: dict[float, float] = {}
        self._asks: dict[float, float] = {}
        self._bid_keys: list[float] = []
        self._ask_keys: list[float] = []
        self._book_seen = False
        self._book_dirty = True
        self._sample: tuple | None = None
        self._top: tuple | None = None  # (best bid, qty, best ask, qty) last derived
        # quote state carried across seconds
        self._q_bid: float | None = None
        self._q_ask: float | None = None
        # per-second quote accumulators: explicit (Quote events) and derived (book)
        self._explicit = _Spreads()  # of the open second's Quote events
        self._derived = _Spreads()  # of the open second's book-derived quotes
        # clock: the open second and the open bar
        self._sec: int | None = None
        self._bar: Bar | None = None
        self._bar_end = 0
        self._out: list[Bar] = []
        self._warm_ok = start_ms is not None  # events before start_ms still allowed
        if start_ms is not None:
            self._open_at(start_ms - start_ms % SECOND_MS)

    # -- public API ---------------------------------------------------------------
    def feed(self, event) -> None:
        """Apply one event (Trade, BookSnapshot, BookDelta or Quote)."""
        ts = event.ts_ms
        sec = self._sec
        if sec is None:
            self._open_at(ts - ts % SECOND_MS)
            sec = self._sec
        if ts >= sec + SECOND_MS:
            self._warm_ok = False
            self._advance(ts - ts % SECOND_MS)
        elif ts < sec:
            if self._warm_ok and self._warm(event):
                return
            raise ValueError(
                f"event at ts_ms={ts} is earlier than the open second {sec}: "
                "events must be fed in time order and not before a flush point"
            )
        else:
            self._warm_ok = False
        apply = self._APPLY.get(type(event))
        if apply is None:
            raise TypeError(f"not a market event: {event!r}")
        apply(self, event)

    def feed_many(self, events: Iterable) -> None:
        feed = self.feed
        for event in events:
            feed(event)

    def drain(self) -> list[Bar]:
        """The bars completed since the last drain/flush, oldest first."""
        out, self._out = self._out, []
        return out

    def flush(self, until_ms: int) -> list[Bar]:
        """Close every second ending at or before until_ms; return all completed bars
        not yet drained (those from earlier feeds included). Later events must have
        ts_ms >= the closed point."""
        if self._sec is None:
            return self.drain()
        self._warm_ok = False
        target = until_ms - until_ms % SECOND_MS
        if target > self._sec:
            self._advance(target)
        return self.drain()

    def process(self, events: Iterable, until_ms: int) -> list[Bar]:
        """feed_many(events) then flush(until_ms)."""
        self.feed_many(events)
        return self.flush(until_ms)

    @property
    def open_second_ms(self) -> int | None:
        """Start of the second still open (bars before it are complete)."""
        return self._sec

    def best_bid(self) -> float | None:
        return self._bid_keys[-1] if self._bid_keys else None

    def best_ask(self) -> float | None:
        return self._ask_keys[0] if self._ask_keys else None

    def book(self) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """The current book: bids best first, asks best first."""
        bids, asks = self._bids, self._asks
        return ([(p, bids[p]) for p in reversed(self._bid_keys)], [(p, asks[p]) for p in self._ask_keys])

    # -- checkpoints ----------------------------------------------------------------
    def state(self) -> bytes:
        """What a restarted builder needs, taken at a flush point (no second half-done)."""
        if self._out:
            raise ValueError("drain the completed bars before taking the state")
        return orjson.dumps({
            "v": 1, "sec": self._sec, "book_seen": self._book_seen,
            "bids": list(self._bids.items()), "asks": list(self._asks.items()),
            "q": [self._q_bid, self._q_ask], "top": self._top,
            "interval_ms": self.interval_ms, "depth_band": self.depth_band, "quotes": self.quotes,
        })

    @classmethod
    def restore(cls, pair_ref: PairRef, state: bytes) -> "BarBuilder":
        data = orjson.loads(state)
        if data.get("v") != 1:
            raise ValueError("not a bar builder state of this version")
        builder = cls(pair_ref, data["depth_band"], interval_ms=data["interval_ms"], quotes=data["quotes"],
                      start_ms=data["sec"])
        builder._bids, builder._bid_keys = side_from_levels(data["bids"])
        builder._asks, builder._ask_keys = side_from_levels(data["asks"])
        builder._book_seen = data["book_seen"]
        builder._q_bid, builder._q_ask = data["q"]
        builder._top = tuple(data["top"]) if data["top"] else None
        return builder

    # -- clock --------------------------------------------------------------------
    def _open_at(self, sec: int) -> None:
        self._sec = sec
        start = sec - sec % self.interval_ms
        self._bar = Bar(ts_ms=start)
        self._bar_end = start + self.interval_ms

    def _advance(self, target_sec: int) -> None:
        """Close seconds until target_sec is the open second."""
        interval = self.interval_ms
        while self._sec < target_sec:
            self._close_second()
            sec = self._sec + SECOND_MS
            self._sec = sec
            if sec >= self._bar_end:
                self._out.append(self._bar)
                self._bar = Bar(ts_ms=sec)
                self._bar_end = sec + interval

    def _close_second(self) -> None:
        bar = self._bar
        # quotes of the second: explicit Quote events win, else book-derived
        quotes = self._explicit if self._explicit.n else self._derived if self._derived.n else None
        if quotes is not None:
            bar.quote_count += quotes.n
            bar.spread_bps_sum += quotes.sum
            if bar.spread_bps_min is None or quotes.min < bar.spread_bps_min:
                bar.spread_bps_min = quotes.min
            if bar.spread_bps_max is None or quotes.max > bar.spread_bps_max:
                bar.spread_bps_max = quotes.max
            if self._q_bid != quotes.bid or self._q_ask != quotes.ask:
                self._q_bid, self._q_ask = quotes.bid, quotes.ask
                self._book_dirty = True  # the mid may come from the quote
            self._explicit.clear()
            self._derived.clear()
        bar.bid_price = self._q_bid
        bar.ask_price = self._q_ask
        if self._book_seen:
            if self._book_dirty:
                self._sample = self._take_sample()
                self._book_dirty = False
            ba, aa, bn, an, bo, ao = self._sample
            bar.book_samples += 1
            bar.bid_amount_sum += ba
            bar.ask_amount_sum += aa
            bar.bid_notional_sum += bn
            bar.ask_notional_sum += an
            bar.bid_orders_sum += bo
            bar.ask_orders_sum += ao

    def _take_sample(self) -> tuple:
        bid_keys, ask_keys = self._bid_keys, self._ask_keys
        if bid_keys and ask_keys:
            mid = (bid_keys[-1] + ask_keys[0]) / 2
        elif self._q_bid is not None and self._q_ask is not None:
            mid = (self._q_bid + self._q_ask) / 2
        elif bid_keys:
            mid = bid_keys[-1]
        elif ask_keys:
            mid = ask_keys[0]
        else:
            return (0.0, 0.0, 0.0, 0.0, 0, 0)
        band = self.depth_band
        bids, asks = self._bids, self._asks
        bid_amount = bid_notional = 0.0
        i = bisect_left(bid_keys, mid * (1 - band))
        for j in range(i, len(bid_keys)):
            p = bid_keys[j]
            q = bids[p]
            bid_amount += q
            bid_notional += p * q
        ask_amount = ask_notional = 0.0
        k = bisect_right(ask_keys, mid * (1 + band))
        for j in range(k):
            p = ask_keys[j]
            q = asks[p]
            ask_amount += q
            ask_notional += p * q
        return (bid_amount, ask_amount, bid_notional, ask_notional, len(bid_keys) - i, k)

    # -- events -------------------------------------------------------------------
    def _warm(self, event) -> bool:
        """Apply an event before start_ms to the state only. True when handled."""
        kind = type(event)
        change_book = self._BOOK_CHANGES.get(kind)
        if change_book is not None:
            change_book(self, event)
        elif kind is Quote:
            if self._use_explicit:
                self._q_bid, self._q_ask = event.bid_price, event.ask_price
        elif kind is not Trade:
            return False
        # warm-up quotes do not count in the first bar
        self._explicit.clear()
        self._derived.clear()
        if self._top is not None and kind is not Quote and kind is not Trade and self._use_derived:
            self._q_bid, self._q_ask = self._top[0], self._top[2]
        return True

    def _trade(self, t: Trade) -> None:
        bar = self._bar
        p = t.price
        q = t.qty
        n = bar.trade_count + 1
        bar.trade_count = n
        if n == 1:
            bar.open = bar.high = bar.low = p
            bar.price_mean = p
            bar.price_m2 = 0.0
        else:
            if p > bar.high:
                bar.high = p
            elif p < bar.low:
                bar.low = p
            d = p - bar.price_mean
            mean = bar.price_mean + d / n
            bar.price_mean = mean
            bar.price_m2 += d * (p - mean)
        bar.close = p
        bar.volume += q
        bar.notional += p * q
        side = t.side
        if side == "buy":
            bar.buy_volume += q
        elif side == "sell":
            bar.sell_volume += q

    def _quote(self, q: Quote) -> None:
        if not self._use_explicit:
            return
        self._explicit.add(q.bid_price, q.ask_price)
        if not self._bid_keys or not self._ask_keys:
            self._book_dirty = True

    def _snapshot(self, s: BookSnapshot) -> None:
        self._bids, self._bid_keys = side_from_levels(s.bids)
        self._asks, self._ask_keys = side_from_levels(s.asks)
        self._book_seen = True
        self._book_dirty = True
        if self._use_derived:
            self._derive()

    def _lose_book(self, _lost: BookLost | None = None) -> None:
        self._bids, self._asks = {}, {}
        self._bid_keys, self._ask_keys = [], []
        self._book_seen = False
        self._book_dirty = True
        self._top = None
        # quotes seen before the loss say nothing about the book that comes back
        self._q_bid = self._q_ask = None
        self._explicit.clear()
        self._derived.clear()

    def _delta(self, d: BookDelta) -> None:
        if d.bids:
            book, keys = self._bids, self._bid_keys
            for p, q in d.bids:
                level_set(book, keys, p, q)
        if d.asks:
            book, keys = self._asks, self._ask_keys
            for p, q in d.asks:
                level_set(book, keys, p, q)
        self._book_seen = True
        self._book_dirty = True
        if self._use_derived:
            self._derive()

    def _derive(self) -> None:
        """A book-derived quote when the top of the book changed."""
        bid_keys, ask_keys = self._bid_keys, self._ask_keys
        if not bid_keys or not ask_keys:
            return
        bid = bid_keys[-1]
        ask = ask_keys[0]
        top = (bid, self._bids[bid], ask, self._asks[ask])
        if top == self._top:
            return
        self._top = top
        self._derived.add(bid, ask)

    # what each kind of event does: to the book alone (also before the first bar), and in all
    _BOOK_CHANGES = {BookDelta: _delta, BookSnapshot: _snapshot, BookLost: _lose_book}
    _APPLY = {**_BOOK_CHANGES, Trade: _trade, Quote: _quote}


class _Spreads:
    """The spreads (bps) of the quotes seen in the open second, and the last bid and ask."""

    __slots__ = ("n", "sum", "min", "max", "bid", "ask")

    def __init__(self) -> None:
        self.n = 0
        self.sum = self.min = self.max = 0.0
        self.bid = self.ask = 0.0

    def add(self, bid: float, ask: float) -> None:
        mid = (bid + ask) / 2
        spread = (ask - bid) / mid * 10_000 if mid else 0.0
        if self.n:
            self.n += 1
            self.sum += spread
            if spread < self.min:
                self.min = spread
            if spread > self.max:
                self.max = spread
        else:
            self.n = 1
            self.sum = self.min = self.max = spread
        self.bid, self.ask = bid, ask

    def clear(self) -> None:
        self.n = 0
        self.sum = 0.0


def build_bars(events: Iterable, pair_ref: PairRef, start_ms: int, end_ms: int, **options) -> list[Bar]:
    """Bars for [start_ms, end_ms) from events (events before start_ms warm the book up)."""
    builder = BarBuilder(pair_ref, start_ms=start_ms, **options)
    builder.feed_many(events)
    return builder.flush(end_ms)
