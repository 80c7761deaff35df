"""One simulated hour of background flow: a fair value that wanders (random walk, trend
regimes, pressure from book imbalance), limit adds, cancels, market-maker re-quotes and
takers. Episode scripts run on the same clock through `schedule`. Plain Python."""

from __future__ import annotations

import heapq
import math
from collections import deque
from statistics import median

from ..events import BUY, SELL
from .book import Book

HOUR_MS = 3_600_000
WARMUP_MS = 20_000
_BUCKETS = ((0, 2), (3, 10), (11, 25), (26, 10**9))


class Sim:
    def __init__(self, profile, rng, start_ms: int, fair0: float, fair1: float, trade_prefix: str):
        p = self.p = profile
        self.rng = rng
        self.t0, self.t1 = start_ms, start_ms + HOUR_MS
        self.book = Book(p, p.visible_levels)
        self.book.trade_prefix = trade_prefix
        self.fair = fair0 / p.tick
        self.target = fair1 / p.tick
        self.sigma = p.sigma_ticks_1s
        self.drift = 0.0
        self.regime_end = start_ms - WARMUP_MS
        self.heap: list = []
        self.seq = 0
        self.now = start_ms - WARMUP_MS
        self.out: list = []
        self._imb = 0.0
        self._imb_at = -1
        # one sample a second of each side's top-10 depth: the last 30 minutes' baseline
        self.depth10 = {"bid": deque(maxlen=1800), "ask": deque(maxlen=1800)}
        self._seed_book()

    # --- scheduling --------------------------------------------------------------
    def schedule(self, ts: float, fn) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (max(int(ts), self.now), self.seq, fn))

    # --- draws ---------------------------------------------------------------------
    def _distance(self) -> int:
        p, r = self.p, self.rng
        if r.random() < p.near_share:
            return int(r.expovariate(1.0 / p.near_mean_ticks))
        return r.randint(0, p.far_ticks)

    def _lots(self, d: int) -> int:
        p = self.p
        return max(1, int(p.level_lots * self.rng.lognormvariate(0.0, 0.7) * (1 + p.depth_growth * d / p.far_ticks)))

    def ref_tick(self, name: str) -> int:
        hs = self.p.half_spread_ticks
        return math.floor(self.fair - hs) if name == "bid" else math.ceil(self.fair + hs)

    def _seed_book(self) -> None:
        for name, sign in (("bid", 1), ("ask", -1)):
            ref = self.ref_tick(name)
            for _ in range(self.p.target_levels):
                d = self._distance()
                self.book.side(name).add(ref - sign * d, self._lots(d))

    # --- measures episodes read ------------------------------------------------------
    def imbalance(self) -> float:
        if self._imb_at != self.now // 100:
            b, a = self.book.depth(self.book.bid, 10), self.book.depth(self.book.ask, 10)
            self._imb = (b - a) / (b + a) if b + a else 0.0
            self._imb_at = self.now // 100
        return self._imb

    def median_level(self, name: str, d: int) -> float:
        """Median visible level size in the distance bucket of d ticks (all levels if few)."""
        side = self.book.side(name)
        best = side.best()
        lo, hi = next(b for b in _BUCKETS if b[0] <= d <= b[1])
        sizes = [q for t, q in side.vis.items() if lo <= abs(best - t) <= hi]
        if len(sizes) < 3:
            sizes = list(side.vis.values()) or [self.p.level_lots]
        return median(sizes)

    def large_lots(self, name: str, d: int) -> float:
        """DETECTION.md's large add: max(5 x median level at that distance, 15 % of top-20 depth)."""
        return max(5 * self.median_level(name, d), 0.15 * self.book.depth(self.book.side(name), 20))

    def baseline_depth10(self, name: str) -> float:
        hist = self.depth10[name]
        return median(hist) if hist else self.book.depth(self.book.side(name), 10)

    def taker_second(self) -> float:
        return self.p.rate_market * self.p.market_lots

    # --- background events -----------------------------------------------------------
    def _advance(self, dt_ms: float) -> None:
        if dt_ms <= 0:
            return
        dt = dt_ms / 1000.0
        if self.now >= self.regime_end:
            r = self.rng
            self.drift = (r.choice((-1, 1)) * r.uniform(0.05, 0.25) * self.sigma) if r.random() < 0.35 else 0.0
            self.regime_end = self.now + int(r.expovariate(1 / 150.0) * 1000) + 1000
        # a bridge to the next hour's anchor (trends fade out before it) keeps the price
        # continuous across hours that are simulated independently
        left = (self.t1 - self.now) / 1000.0
        bridge = (self.target - self.fair) / max(left, 2.0)
        drift = self.drift * min(1.0, left / 600.0)
        pressure = 1.0 * self.imbalance() * self.sigma * min(1.0, left / 60.0)
        self.fair += (drift + bridge + pressure) * dt + self.sigma * math.sqrt(dt) * self.rng.gauss(0.0, 1.0)

    def _add(self) -> None:
        bk = self.book
        nb, na = len(bk.bid.keys), len(bk.ask.keys)
        name = "bid" if self.rng.random() < 0.5 + 0.3 * (na - nb) / max(1, na + nb) else "ask"
        d = self._distance()
        sign = 1 if name == "bid" else -1
        bk.add_limit(name, self.ref_tick(name) - sign * d, self._lots(d))

    def _cancel(self) -> None:
        bk, r = self.book, self.rng
        nb, na = len(bk.bid.keys), len(bk.ask.keys)
        side = bk.bid if r.random() * (nb + na) < nb else bk.ask
        if not side.keys:
            return
        t = -side.sign * side.keys[r.randrange(len(side.keys))]
        bg = side.background(t)
        if bg > 0:
            side.cancel_background(t, bg if r.random() < 0.55 else max(1, int(bg * r.random())))

    def _market(self) -> None:
        bk, r = self.book, self.rng
        m2 = bk.mid2()
        if m2 is None:
            return
        dev = self.fair - m2 / 2
        scale = max(1.0, 0.5 * self.sigma)
        p_buy = 0.5 + 0.3 * math.tanh(dev / scale) + 0.3 * self.imbalance()
        taker = BUY if r.random() < p_buy else SELL
        lots = max(1, int(self.p.market_lots * r.lognormvariate(0.0, 0.9)))
        limit = None
        # now and then a taker catches up with a fair value that ran ahead (stale quotes are
        # mostly cancelled by their makers instead: see _requote)
        if taker == BUY and dev > scale and r.random() < 0.25:
            lots, limit = 10**12, math.floor(self.fair - 0.5 * scale)
        elif taker == SELL and dev < -scale and r.random() < 0.25:
            lots, limit = 10**12, math.ceil(self.fair + 0.5 * scale)
        bk.market(taker, lots, self.now, limit)

    def _requote(self) -> None:
        """A market maker moves a few of its quotes at once towards the fair value."""
        bk, r = self.book, self.rng
        name = "bid" if r.random() < 0.5 else "ask"
        side = bk.side(name)
        if len(side.keys) < 10:
            return
        ref = self.ref_tick(name)
        stale = [k for k in side.keys[:4] if (-side.sign * k - ref) * side.sign > 0]
        for k in stale:  # quotes the fair value has moved through go first
            t = -side.sign * k
            moved = side.cancel_background(t, side.background(t))
            if moved:
                bk.add_limit(name, ref - side.sign * int(r.expovariate(1.0 / self.p.near_mean_ticks)), moved)
        for k in r.sample(side.keys[:8], r.randint(2, 4)):
            t = -side.sign * k
            moved = side.cancel_background(t, side.background(t))
            if moved:
                d = int(r.expovariate(1.0 / self.p.near_mean_ticks))
                bk.add_limit(name, ref - side.sign * d, moved)

    def _trim(self) -> None:
        """Levels far from the touch leave silently: they are beyond the view."""
        for side in (self.book.bid, self.book.ask):
            best = side.best()
            while len(side.keys) > self.p.visible_levels + 5:
                t = -side.sign * side.keys[-1]
                if len(side.keys) <= self.p.keep_levels and abs(best - t) <= self.p.max_depth_ticks:
                    break
                if t in side.own:
                    break
                side.remove(t, side.qty[t])

    # --- the loop --------------------------------------------------------------------
    def run(self) -> list:
        p, r, bk = self.p, self.rng, self.book
        t = float(self.now)
        cur = self.now
        started = False
        next_trim = cur + 1000
        heap = self.heap
        while True:
            nb, na = len(bk.bid.keys), len(bk.ask.keys)
            w_cancel = p.rate_cancel * (nb + na) / (2 * p.target_levels)
            w = p.rate_add + w_cancel + p.rate_market + p.rate_requote
            t_next = t + r.expovariate(w) * 1000.0
            scripted = bool(heap) and heap[0][0] <= t_next
            if scripted:
                t_next = float(heap[0][0])
            ms = int(t_next)
            if ms >= self.t1:
                break
            self._advance(t_next - t)
            t = t_next
            if ms != cur:
                bk.flush(cur)
                cur = ms
                if not started and ms >= self.t0:
                    started = True
                    self.out = [bk.snapshot(self.t0)]
                    bk.out = self.out
            self.now = ms
            if scripted:
                heapq.heappop(heap)[2](ms)
                continue
            if ms >= next_trim:
                self._trim()
                next_trim = ms + 1000
                self.depth10["bid"].append(bk.depth(bk.bid, 10))
                self.depth10["ask"].append(bk.depth(bk.ask, 10))
            u = r.random() * w
            if u < p.rate_add:
                self._add()
            elif u < p.rate_add + w_cancel:
                self._cancel()
            elif u < p.rate_add + w_cancel + p.rate_market:
                self._market()
            else:
                self._requote()
        bk.flush(cur)
        return self.out
