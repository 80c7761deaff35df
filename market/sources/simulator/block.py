"""One simulated minute of a pair (a block): the price its traders see (the fair path, the
impact of their pressure, the quoted reference price moving in steps), the sizes they
trade in, and the event loop that runs the flows on the minute's book with the minute's
episodes played in.

The book is `book._Book`; the flows acting on it are `order_flow` (limit orders, cancels,
market orders, a crowd of small takers), `informed` (orders the fair price runs over,
market makers following the touch), `ladders` (market makers re-quoting ladders) and the
episodes' actions (`episodes`)."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from market.bars import MINUTE_MS, SECOND_MS

from .book import _Book
from .episodes import _episode_actions
from .flow import _BOOK_SPAN, _nice_floor
from .informed import cross
from .ladders import _RATE_LADDER, draw_ladders, requote
from .order_flow import _RATE_CROWD, add_limit, cancel_limit, crowd_taker, market_order
from .profiles import _RATE_ADD, _RATE_CANCEL, _RATE_MO, _grid_index, _level_shape

if TYPE_CHECKING:
    from .episodes import Episode
    from .profiles import _Profile
    from .source import SimulatorSource


_IMPACT_TAU_S = 20.0  # the impact decays as exp(-t / tau), seconds
_IMPACT_IMBALANCE = 0.8  # drift of the impact, in per-second sigmas per unit of top-10 imbalance
_INF = float("inf")
_PRICE_STEP_BPS = 0.6  # the quoted price follows the fair price in steps of this size


class _Block:
    def __init__(self, src: SimulatorSource, prof: _Profile, m: int, rng: random.Random, episodes: list[Episode]):
        self.src, self.prof, self.m, self.rng, self.episodes = src, prof, m, rng, episodes
        self.t0 = t0 = m * MINUTE_MS
        tick = prof.tick
        self.fair = [x / tick for x in src._mids(prof, [t0 + s * SECOND_MS for s in range(61)])]
        self.act = src._activity(t0 + 30 * SECOND_MS)
        self.sig_s = prof.sigma_daily / math.sqrt(86_400) * src.regime(t0)
        usd_base = self.fair[0] * tick * prof.usd_quote
        lots_per_usd = 1.0 / (usd_base * prof.lot)
        self.level_lots = prof.level_usd * lots_per_usd
        self.bps_per_tick = 1e4 / self.fair[0]
        self.step_ticks = max(1.0, _PRICE_STEP_BPS / self.bps_per_tick)
        self.trade_lots = prof.trade_usd * lots_per_usd
        self.c, self.half_spread, self.grid = prof.c, prof.half_spread, prof.grid
        self.dmax = _BOOK_SPAN * self.fair[0]
        self.book = _Book(prof, m)
        # (kind, side, start_ms) -> share of what a spoofing episode placed that still rested
        # when its pull began (orders takers filled first leave nothing to pull)
        self.resting_at_pull: dict = {}
        self.impact = 0.0
        self.t = 0.0
        self.r = self.fair[0]
        self.imb = 0.0
        self.seq_actions = 0  # scheduled episode actions (orders equal times)

    # -- sizes -------------------------------------------------------------------------
    def level_shape_at(self, d_ticks: float) -> float:
        """The median level size d ticks from the reference price, relative to level_lots."""
        return _level_shape(_grid_index(d_ticks, self.grid), d_ticks * self.bps_per_tick)

    def median_lots(self, d_ticks: float) -> float:
        """Median resting size at d ticks from the reference price."""
        return max(1.0, self.level_lots * self.level_shape_at(d_ticks))

    def typical_lots(self, is_bid: bool, d_ticks: float) -> float:
        """The typical level an observer of the book sees d ticks behind the touch: the
        median size of the five visible levels of the side nearest that distance (what
        the detectors' rolling median by distance bucket measures), nominal on a thin
        book. Episode sizes are multiples of this."""
        book, keys = self.book.side(is_bid)
        if len(keys) < 5:
            return self.median_lots(self.half_spread + d_ticks)
        touch = keys[-1] if is_bid else keys[0]
        if d_ticks < 1:
            # the best level is a class of its own (market makers' quotes meet there), as it
            # is for the detectors' typical level: an order at the touch is measured by it
            return max(1.0, float(book[touch]))
        near = keys[-40:] if is_bid else keys[:40]
        near = sorted(near, key=lambda tk: abs(abs(tk - touch) - d_ticks))[:5]
        sizes = sorted(book[tk] for tk in near)
        return max(1.0, float(sizes[2]))

    def usual_lots(self, what: str) -> float:
        """The side's usual "top10" or "top20" depth or "touch" level in lots: what a rolling
        baseline of the book holds, whatever the book shows right now."""
        return self.src._calibration(self.prof)[what] * self.level_lots

    def usual_taker_second(self) -> float:
        """The typical taker volume of one second at this minute's activity, in lots."""
        return self.src._calibration(self.prof)["taker_second"] * self.trade_lots * self.prof.rate_scale * self.act

    def large_lots(self, is_bid: bool, d_ticks: float, size_ratio: float, depth_share: float) -> float:
        """An order DETECTION.md calls large, d ticks behind the touch: size_ratio x the
        typical level there and depth_share of the side's top-20 depth, measured against the
        book as it stands and against its usual state (DETECTION.md's baselines are rolling
        30-minute medians), so a thin moment does not make an order large."""
        typical = self.typical_lots(is_bid, d_ticks)
        if d_ticks < 1:
            typical = max(typical, self.usual_lots("touch"))
        return max(size_ratio * typical, depth_share * max(self.book.top_depth(is_bid, 20), self.usual_lots("top20")))

    def depth_lots_1pct(self) -> float:
        """The pair's nominal depth of a side within 1 % of the price, in lots."""
        prof = self.prof
        return prof.depth_usd / (self.fair[0] * prof.tick * prof.usd_quote * prof.lot)

    # -- price ---------------------------------------------------------------------------
    def clock(self, t: float) -> None:
        """Move the minute to t ms: the impact decays and drifts with the imbalance, and
        the reference price follows the fair price (plus impact) in steps."""
        dt = (t - self.t) / 1000.0
        self.t = t
        self.book.ts = self.t0 + int(t)
        if dt > 0:
            self.impact = self.impact * math.exp(-dt / _IMPACT_TAU_S) + _IMPACT_IMBALANCE * self.imb * self.sig_s * dt
        s = int(t // 1000)
        f = t / 1000.0 - s
        fair = self.fair
        base = fair[s] + (fair[s + 1] - fair[s]) * f
        taper = min(1.0, (60_000.0 - t) / 10_000.0)
        fair_now = base * math.exp(self.impact * taper)
        # the quoted price moves in steps: real mids stand still in half of the seconds and
        # then jump (1 s moves p90 1.5-1.8 bps on the recordings), where a fair price
        # followed tick by tick would run over the levels at the touch all the time
        if abs(fair_now - self.r) >= self.step_ticks:
            self.r = fair_now

    def best(self, is_bid: bool) -> int:
        """The side's best tick, or where it would be around the reference price when empty."""
        touch = self.book.touch(is_bid)
        if touch is not None:
            return touch
        return math.floor(self.r - self.half_spread) if is_bid else math.ceil(self.r + self.half_spread)

    def buy_probability(self) -> float:
        """The chance that a taker buys: traders lean with the top-10 imbalance."""
        return min(0.9, max(0.1, 0.5 + 0.4 * self.imb))

    def grid_tick(self, is_bid: bool, d: float) -> int:
        """The price-grid tick d ticks from the reference price (coarser further out)."""
        s = _nice_floor(max(1.0, (d - self.half_spread) / self.c))
        if is_bid:
            return math.floor((self.r - d) / s) * s
        return -math.floor(-(self.r + d) / s) * s

    # -- episodes ------------------------------------------------------------------------
    def note_resting(self, ep: Episode, orders) -> None:
        """Record, once, how much of what `ep` placed still rests as its pull begins."""
        key = (ep.kind, ep.side, ep.start_ms)
        if key not in self.resting_at_pull:
            placed = sum(o.orig for o in orders)
            self.resting_at_pull[key] = sum(o.rem for o in orders) / placed if placed else 1.0

    # -- the minute ------------------------------------------------------------------------
    def housekeeping(self) -> None:
        """Once a second: traders read the imbalance, and orders far behind the price expire."""
        book = self.book
        self.imb = book.imbalance()
        book.prune_outside(self.r - self.dmax * 1.1, self.r + self.dmax * 1.1)

    def draw_book(self) -> None:
        """The book at the minute's start, drawn fresh around the reference price on its grid."""
        rng = self.rng
        book = self.book
        r, c, half_spread, dmax = self.r, self.c, self.half_spread, self.dmax
        for is_bid in (True, False):
            tk = math.floor(r - half_spread) if is_bid else math.ceil(r + half_spread)
            while True:
                d = abs(tk - r)
                if d > dmax:
                    break
                k = _grid_index(d, self.grid)
                if rng.random() < (0.9 if k < c else 0.8):
                    lots = int(self.level_lots * _level_shape(k, d * self.bps_per_tick) * rng.lognormvariate(0.0, 0.8)) + 1
                    book.set_level(is_bid, tk, lots)
                s = _nice_floor(max(1.0, (d - half_spread) / c))
                tk = ((tk - 1) // s) * s if is_bid else -((-(tk + 1)) // s) * s

    def run(self) -> list:
        """Play the minute: the snapshot, then the flows and the episodes' actions in time
        order, the book flushed into events after each. Returns the events."""
        rng = self.rng
        book = self.book
        self.draw_book()
        actions: list = []
        for ep in self.episodes:
            actions.extend(_episode_actions(self, ep))
        actions.sort(key=lambda a: (a[0], a[1]))
        self.depth0 = max(1, (book.depth_b + book.depth_a) // 2)
        self.max_levels = int(1.1 * (len(book.bid_ticks) + len(book.ask_ticks)) / 2) + 2
        book.snapshot(self.t0)
        self.housekeeping()
        book.flush()
        ladders = draw_ladders(self)
        for ladder in ladders:
            requote(self, ladder)
        book.flush()
        scale = self.prof.rate_scale * self.act / 1000.0
        ra, rc, rm = _RATE_ADD * scale, _RATE_CANCEL * scale, _RATE_MO * scale
        rl, rw = _RATE_LADDER * scale, _RATE_CROWD * scale
        rac = ra + rc
        racm = rac + rm
        racml = racm + rl
        rate = racml + rw
        n_ladders = len(ladders)
        t = 0.0
        next_sec = 1000.0
        ai, n_actions = 0, len(actions)
        expo = rng.expovariate
        rand = rng.random
        flush = book.flush
        while True:
            t_next = t + expo(rate)
            while True:
                ta = actions[ai][0] if ai < n_actions else _INF
                if next_sec < 60_000.0 and next_sec <= ta and next_sec <= t_next:
                    self.clock(next_sec)
                    cross(self)
                    self.housekeeping()
                    flush()
                    next_sec += 1000.0
                elif ta <= t_next and ta < 60_000.0:
                    self.clock(ta)
                    cross(self)
                    flush()
                    actions[ai][2]()
                    cross(self)
                    flush()
                    ai += 1
                else:
                    break
            if t_next >= 60_000.0:
                break
            t = t_next
            self.clock(t)
            cross(self)
            flush()
            u = rand() * rate
            if u < ra:
                add_limit(self)
            elif u < rac:
                cancel_limit(self)
            elif u < racm:
                market_order(self)
            elif u < racml:
                requote(self, ladders[int(rand() * n_ladders)])
            else:
                crowd_taker(self)
            flush()
        return book.out
