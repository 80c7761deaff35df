"""Level-by-level order book tracker and rolling per-pair baselines. Plain Python.

The tracker keeps the visible book by price level. For every `BookDelta` it reports one
`Change` per level that changed, with the shrink split into executed and cancelled:
trades printed at that price (on that side) since the previous book update in the same
millisecond window count as executed, the rest of the shrink as cancelled. Two kinds of
removal are not cancels: the deepest level of a side disappearing (the level scrolls out
of a truncated view) and a `BookSnapshot` (a resync: the book is replaced, the baselines
and history stay).

Baselines (rolling 30 minutes, per pair): median level size by distance bucket, top-20
depth per side, sigma of 1 s mid returns (in price units and bps), median taker volume
per second. They are sampled once a second of event time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

from market.sources.order_book import level_set, side_from_levels

BASELINE_WINDOW_MS = 30 * 60 * 1000
# Top-10 depth above this quantile of the side's last 30 minutes is unusual: on real books
# (and the simulator's) it swings to 1.5 x its median one second in four, to 2 x one in ten
UNUSUAL_DEPTH_QUANTILE = 0.9
_RECOMPUTE_MS = 15_000


@dataclass(slots=True)
class Change:
    """One level change of a delta. dist_ticks: distance from the own-side touch before
    the update (0 = at the touch, negative = improving the touch). runover: the best
    level vanished entirely (price ran through it); scrolled: deepest level left the view."""

    side: str
    price: float
    old: float
    new: float
    added: float
    executed: float
    cancelled: float
    dist_ticks: float
    level_index: int
    runover: bool
    scrolled: bool


BIG_CANCEL_SHARE = 0.3  # a single cancel >= this share of an order's remainder is its own


def cancel_attributed(cancelled: float, remaining: float, level_before: float,
                      big_share: float = BIG_CANCEL_SHARE) -> float:
    """How much of a level's cancel belongs to one order of ours resting there: one large
    cancel (>= big_share of its remainder) is the order's own; smaller ones (the queue's
    typical background cancels) only in proportion to its share of the level."""
    if remaining <= 0 or cancelled <= 0:
        return 0.0
    if cancelled >= big_share * remaining:
        return min(cancelled, remaining)
    return cancelled * remaining / level_before if level_before > 0 else 0.0


def _median(values) -> float:
    s = sorted(values)
    n = len(s)
    if not n:
        return 0.0
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _quantile(values, q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


class Baselines:
    """Rolling 30-minute baselines, one sample a second of event time."""

    N_BUCKETS = 8

    def __init__(self) -> None:
        n = BASELINE_WINDOW_MS // 1000
        self.depth20 = {"bid": deque(maxlen=n), "ask": deque(maxlen=n)}
        self.depth10 = {"bid": deque(maxlen=n), "ask": deque(maxlen=n)}
        self.returns = deque(maxlen=n)  # 1 s mid returns (log)
        self.taker = deque(maxlen=n)  # taker volume per second (base qty)
        self.level_sizes = [deque(maxlen=4000) for _ in range(self.N_BUCKETS)]
        self._last_mid: float | None = None
        self._next_recompute = 0
        # current values
        self.med_depth20 = {"bid": 0.0, "ask": 0.0}
        self.med_depth10 = {"bid": 0.0, "ask": 0.0}
        # what the side's top-10 depth exceeds one second in five (UNUSUAL_DEPTH_QUANTILE)
        self.unusual_depth10 = {"bid": 0.0, "ask": 0.0}
        self.sigma_ret = 0.0  # of 1 s log mid returns
        self.med_taker = 0.0
        self.med_level = [0.0] * self.N_BUCKETS

    @staticmethod
    def bucket(dist_scaled: float) -> int:
        """Distance bucket: the touch itself (distance <= 0), then < 1.5, 2-3, 4-7, 8-15,
        16-31, 32-63, 64+ scaled ticks behind it. The touch is a bucket of its own: it
        holds the queue (on real books 20 to 600 times the level behind it)."""
        if dist_scaled <= 0:
            return 0
        d = int(dist_scaled + 0.5)
        if d <= 1:
            return 1
        b = d.bit_length()
        return b if b < Baselines.N_BUCKETS else Baselines.N_BUCKETS - 1

    def sample(self, ts_ms: int, mid: float | None, d20: dict, d10: dict, taker_qty: float) -> None:
        for s in ("bid", "ask"):
            self.depth20[s].append(d20[s])
            self.depth10[s].append(d10[s])
        self.taker.append(taker_qty)
        if mid and self._last_mid:
            import math

            self.returns.append(math.log(mid / self._last_mid))
        self._last_mid = mid
        if ts_ms >= self._next_recompute or len(self.taker) < 60:
            self.recompute()
            self._next_recompute = ts_ms + _RECOMPUTE_MS

    def add_levels(self, sizes_by_bucket) -> None:
        for b, q in sizes_by_bucket:
            self.level_sizes[b].append(q)

    def recompute(self) -> None:
        for s in ("bid", "ask"):
            self.med_depth20[s] = _median(self.depth20[s])
            self.med_depth10[s] = _median(self.depth10[s])
            self.unusual_depth10[s] = _quantile(self.depth10[s], UNUSUAL_DEPTH_QUANTILE)
        r = self.returns
        if len(r) > 5:
            m = sum(r) / len(r)
            self.sigma_ret = (sum((x - m) ** 2 for x in r) / (len(r) - 1)) ** 0.5
        self.med_taker = _median(self.taker)
        last = 0.0
        for b in range(self.N_BUCKETS):
            if len(self.level_sizes[b]) >= 5:
                last = _median(self.level_sizes[b])
            self.med_level[b] = last  # an empty bucket borrows the nearer one

    def level_median(self, dist_scaled: float) -> float:
        return self.med_level[self.bucket(dist_scaled)]


class BookTracker:
    """The visible book by price level plus second-by-second sampling of baselines."""

    def __init__(self, tick_size: float | None = None, distance_scale: float | None = None,
                 batch_ms: int = 0) -> None:
        self.tick = tick_size
        # A feed that nets its depth updates (Binance's @depth@100ms: batch_ms 100) shows a
        # fill as a level's decrease in the batch after the trade: trades are matched with
        # the decreases at their price in the delta's window [ts - batch_ms, ts]. 0: a
        # per-event feed, where a fill and its decrease share the millisecond.
        self.batch_ms = batch_ms
        self.batch_trades: list = []  # (ts, (side, price), qty) since the last delta
        self.fixed_scale = distance_scale
        self.scale = distance_scale or 1.0
        self.bids: dict[float, float] = {}
        self.asks: dict[float, float] = {}
        self.bk: list[float] = []  # bid prices ascending (best last)
        self.ak: list[float] = []  # ask prices ascending (best first)
        self.pending: dict = {}  # (side, price) -> executed qty not yet matched to a shrink
        self.pending_ts = -1
        self.base = Baselines()
        self.sec = None  # current second (ts // 1000)
        self.sec_taker = 0.0
        self.updates = 0
        self.snapshots = 0
        self.last_ts = 0

    # -- views ---------------------------------------------------------------------
    def best(self, side: str) -> float | None:
        if side == "bid":
            return self.bk[-1] if self.bk else None
        return self.ak[0] if self.ak else None

    def mid(self) -> float | None:
        if self.bk and self.ak:
            return 0.5 * (self.bk[-1] + self.ak[0])
        return None

    def top_depth(self, side: str, n: int) -> float:
        if side == "bid":
            b = self.bids
            return sum(b[p] for p in self.bk[-n:])
        a = self.asks
        return sum(a[p] for p in self.ak[:n])

    def top_prices(self, side: str, n: int) -> list:
        """The prices of the side's n best levels."""
        return self.bk[-n:] if side == "bid" else self.ak[:n]

    def dist_ticks(self, side: str, price: float, touch: float | None) -> float:
        if touch is None:
            return 0.0
        d = (touch - price) if side == "bid" else (price - touch)
        return d / self.tick

    # -- time ------------------------------------------------------------------------
    def _clock(self, ts: int) -> None:
        self.last_ts = ts
        s = ts // 1000
        if self.sec is None:
            self.sec = s
            return
        if s != self.sec:
            # one sample for the second that just ended (the book as it stood then)
            d20 = {"bid": self.top_depth("bid", 20), "ask": self.top_depth("ask", 20)}
            d10 = {"bid": self.top_depth("bid", 10), "ask": self.top_depth("ask", 10)}
            self.base.sample(ts, self.mid(), d20, d10, self.sec_taker)
            for _ in range(min(s - self.sec - 1, 5)):  # quiet seconds: no taker volume
                self.base.sample(ts, self.mid(), d20, d10, 0.0)
            if s % 5 == 0:
                self._sample_levels(20)
            if self.fixed_scale is None and self.base.sigma_ret > 0 and self.tick:
                m = self.mid()
                if m:
                    # half of sigma_1s in ticks is the distance unit on fast, fine-tick
                    # pairs (>= 1 tick): one 'tick' of the thresholds
                    self.scale = max(1.0, 0.15 * self.base.sigma_ret * m / self.tick)
            self.sec = s
            self.sec_taker = 0.0

    def _sample_levels(self, n: int) -> None:
        out = []
        for side, keys, book in (("bid", self.bk[::-1][:n], self.bids), ("ask", self.ak[:n], self.asks)):
            if not keys:
                continue
            touch = keys[0]
            for p in keys:
                d = self.dist_ticks(side, p, touch) / self.scale
                out.append((Baselines.bucket(d), book[p]))
        self.base.add_levels(out)

    def _infer_tick(self, prices) -> None:
        best = None
        for p in prices:
            s = repr(float(p))
            dec = len(s.split(".")[1].rstrip("0")) if "." in s and "e" not in s else 0
            best = dec if best is None else max(best, dec)
        if best is not None:
            self.tick = 10.0 ** (-best)

    # -- events ------------------------------------------------------------------------
    def on_trade(self, trade) -> str:
        """Remember a trade for the next book update; returns the book side it hit."""
        self._clock(trade.ts_ms)
        side = "bid" if trade.side == "sell" else "ask"
        if self.batch_ms:
            self.batch_trades.append((trade.ts_ms, (side, trade.price), trade.qty))
            self.sec_taker += trade.qty
            return side
        if trade.ts_ms != self.pending_ts:
            self.pending.clear()
            self.pending_ts = trade.ts_ms
        key = (side, trade.price)
        self.pending[key] = self.pending.get(key, 0.0) + trade.qty
        self.sec_taker += trade.qty
        return side

    def on_snapshot(self, snap) -> None:
        self._clock(snap.ts_ms)
        if self.tick is None:
            self._infer_tick([p for p, _ in snap.bids[:50]] + [p for p, _ in snap.asks[:50]])
        self.bids, self.bk = side_from_levels(snap.bids)
        self.asks, self.ak = side_from_levels(snap.asks)
        self.pending.clear()
        self.batch_trades = []
        self.snapshots += 1
        self._sample_levels(60)

    def on_delta(self, delta) -> list[Change]:
        ts = delta.ts_ms
        self._clock(ts)
        if self.tick is None:
            self._infer_tick([p for p, _ in delta.bids] + [p for p, _ in delta.asks])
        if self.batch_ms:
            pending = {}
            since = ts - self.batch_ms
            for trade_ts, key, qty in self.batch_trades:
                if trade_ts >= since:
                    pending[key] = pending.get(key, 0.0) + qty
            self.batch_trades = []
        else:
            pending = self.pending if self.pending_ts == ts else None
        out: list[Change] = []
        for side, levels, book, keys in (("bid", delta.bids, self.bids, self.bk),
                                         ("ask", delta.asks, self.asks, self.ak)):
            if not levels:
                continue
            touch = (keys[-1] if side == "bid" else keys[0]) if keys else None
            tick = self.tick or 1.0
            for price, qty in levels:
                self.updates += 1
                old = book.get(price, 0.0)
                if qty == old:
                    continue
                if touch is None:
                    dist = 0.0
                elif side == "bid":
                    dist = (touch - price) / tick
                else:
                    dist = (price - touch) / tick
                i = bisect_left(keys, price)
                if old == 0.0:
                    level_set(book, keys, price, qty)
                    idx = (len(keys) - 1 - i) if side == "bid" else i
                    out.append(Change(side, price, 0.0, qty, qty, 0.0, 0.0, dist, idx, False, False))
                    continue
                idx = (len(keys) - 1 - i) if side == "bid" else i
                if qty > old:
                    level_set(book, keys, price, qty)
                    out.append(Change(side, price, old, qty, qty - old, 0.0, 0.0, dist, idx, False, False))
                    continue
                shrink = old - qty
                ex = 0.0
                if pending:
                    got = pending.get((side, price))
                    if got:
                        ex = got if got < shrink else shrink
                        pending[(side, price)] = got - ex
                canc = shrink - ex
                runover = scrolled = False
                if qty <= 0.0:
                    scrolled = idx == len(keys) - 1 and idx >= 10
                    runover = idx == 0 and canc > 0
                level_set(book, keys, price, qty)
                out.append(Change(side, price, old, qty, 0.0, ex, canc, dist, idx, runover, scrolled))
            if self.batch_ms and keys:
                self._batch_distances(side, out, keys)
        return out

    def _batch_distances(self, side: str, out: list, keys: list) -> None:
        """A netted message shows where the batch left the book, not the touch each add
        met: the touch before the batch may be gone (price moved within it). A level that
        grew is measured from the side's touch after the batch, or, when the level is new
        and is itself that touch, from the best of the other levels (how far it improved
        the touch), as a per-event feed measures a single add."""
        tick = self.tick or 1.0
        touch = keys[-1] if side == "bid" else keys[0]
        second = (keys[-2] if side == "bid" else keys[1]) if len(keys) > 1 else None
        for ch in out:
            if ch.side != side or ch.added <= 0:
                continue
            ref = second if (ch.old == 0.0 and ch.price == touch and second is not None) else touch
            ch.dist_ticks = ((ref - ch.price) if side == "bid" else (ch.price - ref)) / tick

    # -- state ---------------------------------------------------------------------------
    def clear_book(self) -> None:
        self.bids.clear()
        self.asks.clear()
        self.bk.clear()
        self.ak.clear()


class LargeAdd:
    """A large quantity added at one price in one update (a candidate fake order) and what
    became of it: executed (after the queue ahead of it traded) and cancelled quantity."""

    __slots__ = ("side", "price", "t_add", "qty", "ahead", "executed", "cancelled", "dist_ticks", "dist_scaled",
                 "size_ratio", "depth_share", "depth_share_now", "t_first_cancel", "t_pulled", "pull_dist_ticks",
                 "pull_emptied_touch", "closed", "used", "largest_cancel", "moved_in")

    def __init__(self, side, price, t_add, qty, ahead, dist_ticks, dist_scaled, size_ratio, depth_share,
                 depth_share_now):
        self.side, self.price, self.t_add, self.qty, self.ahead = side, price, t_add, qty, ahead
        self.executed = 0.0
        self.cancelled = 0.0
        self.largest_cancel = 0.0  # the largest single cancel attributed to it
        self.dist_ticks, self.dist_scaled = dist_ticks, dist_scaled
        # of the side's top-20 depth: its 30-minute median, and as it stood when the order came
        self.size_ratio, self.depth_share, self.depth_share_now = size_ratio, depth_share, depth_share_now
        self.t_first_cancel = None
        self.t_pulled = None  # when cancelled reached half of qty
        self.pull_dist_ticks = None
        self.pull_emptied_touch = False  # the pull took the whole best level away
        self.closed = False
        self.used = False  # already part of an emitted event
        self.moved_in = False  # a quote re-priced along its side in the update that added it (FlippingDetector._moved_within_side)

    def withdrawn_at_once(self, share: float) -> bool:
        """At least `share` of the order went in one cancel: pulled, not worn down by the
        queue's own small cancels."""
        return self.largest_cancel >= share * self.qty

    @property
    def remaining(self) -> float:
        return self.qty - self.executed - self.cancelled
