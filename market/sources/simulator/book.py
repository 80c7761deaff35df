"""One simulated minute of a pair: the order book and the flow that moves it (limit orders,
cancels, market orders, a crowd of small takers, informed flow, market makers re-quoting
ladders and following the touch), with the minute's episodes played in."""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from typing import TYPE_CHECKING

from market.bars import MINUTE_MS, SECOND_MS
from market.sources.events import BookDelta, BookSnapshot, Quote, Trade
from market.sources.order_book import level_set

from .episodes import _episode_actions
from .flow import _BOOK_SPAN, _nice_floor
from .profiles import _RATE_ADD, _RATE_CANCEL, _RATE_MO, _grid_distance, _grid_index, _level_shape

if TYPE_CHECKING:
    from .episodes import Episode
    from .profiles import _Profile
    from .source import SimulatorSource


_IMPACT_TAU_S = 20.0  # the impact decays as exp(-t / tau), seconds
_IMPACT_IMBALANCE = 0.8  # drift of the impact, in per-second sigmas per unit of top-10 imbalance
_IMPACT_FLOW = 0.15  # kick of one typical market order, in per-second sigmas
_TAKE_STALE = 0.12  # share of orders run over by the fair price that are traded, not cancelled
_ADD_BIAS = 1.5  # adds at level index n_levels * u ** _ADD_BIAS: more near the touch
_FOLLOW = 0.12  # chance per event that a market maker re-quotes a touch left behind
_ADD_SIZE = 0.55  # median add, relative to the median level size at that distance
_INF = float("inf")
_PRICE_STEP_BPS = 0.6  # the quoted price follows the fair price in steps of this size

# Real flow (docs/DETECTION_EVALUATION.md, "Flow: real against simulated"; measured on the
# Binance BTCUSDT and ETHUSDT recordings) is made mostly of market makers re-quoting a
# ladder: one depth message moves a dozen or more levels at once (p50 13-16 levels, p90 70),
# half of the updates delete a level and two fifths open one (the ladder moved with the
# price), the levels lie 0.3-30 bps from the touch (median 5-6 bps), and the book shows a
# large touch with small levels behind it. And trades are many and small: 18-28 prints a
# second, median notional about $35. Rates below are per second for a pair of liquidity 1
# at activity 1; sizes are shares of the pair's depth within 1 %.
_LADDERS = 6  # market makers re-quoting a ladder on each pair
_RATE_LADDER = 14.0  # ladder re-quotes a second (all market makers)
_LADDER_LEVELS = (1, 24)  # levels a side, drawn per market maker (log-uniform)
_LADDER_BPS_MEDIAN = 4.5  # distances of the levels behind the touch: lognormal, bps
_LADDER_BPS_SIGMA = 1.4
_LADDER_TOUCH_SHARE = 0.0025  # a market maker's quote at the touch, share of the depth
_LADDER_LEVEL_SHARE = 0.0006  # a level of the ladder behind the touch
_RATE_CROWD = 18.0  # small taker orders a second, each one print at the touch
_CROWD_USD = 30.0  # their median notional (lognormal, sigma 1.5)


class _Order:
    """A tracked order (episodes): its level, the quantity ahead of it in the queue, what
    remains, what was filled."""

    __slots__ = ("is_bid", "tick", "ahead", "rem", "orig", "filled")

    def __init__(self, is_bid: bool, tick: int, ahead: int, lots: int) -> None:
        self.is_bid, self.tick, self.ahead, self.rem, self.orig, self.filled = is_bid, tick, ahead, lots, lots, 0


class _Ladder:
    """A market maker quoting a ladder on both sides: its own touch quote and levels at
    fixed distances (bps) behind it. A re-quote moves the whole ladder to the fair price:
    one depth message of many levels."""

    __slots__ = ("bps", "touch_lots", "level_lots", "quotes")

    def __init__(self, bps: list, touch_lots: float, level_lots: float) -> None:
        self.bps, self.touch_lots, self.level_lots = bps, touch_lots, level_lots
        self.quotes: list = []  # (is_bid, tick, lots) resting now


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
        self.bids: dict[int, int] = {}
        self.asks: dict[int, int] = {}
        self.depth_b = self.depth_a = 0  # total lots per side
        self.bid_ticks: list[int] = []  # bid ticks ascending (best last)
        self.ask_ticks: list[int] = []  # ask ticks ascending (best first)
        self.special: dict = {}  # (is_bid, tick) -> [_Order]
        self.changed_bids: dict[int, int] = {}
        self.changed_asks: dict[int, int] = {}
        self.out: list = []
        # (kind, side, start_ms) -> share of what a spoofing episode placed that still rested
        # when its pull began (orders takers filled first leave nothing to pull)
        self.resting_at_pull: dict = {}
        self.top = None
        self.impact = 0.0
        self.t = 0.0
        self.ts = t0
        self.r = self.fair[0]
        self.imb = 0.0
        self.seq = 0  # trades in the block (trade ids)
        self.seq_actions = 0  # scheduled episode actions (orders equal times)
        self._tick, self._pdec, self._lot, self._qdec = tick, prof.pdec, prof.lot, prof.qdec

    # -- conversions -------------------------------------------------------------------
    def px(self, tk: int) -> float:
        return round(tk * self._tick, self._pdec)

    def qty(self, lots: int) -> float:
        return round(lots * self._lot, self._qdec)

    def median_lots(self, d_ticks: float) -> float:
        """Median resting size at d ticks from the reference price."""
        return max(1.0, self.level_lots * _level_shape(_grid_index(d_ticks, self.grid), d_ticks * self.bps_per_tick))

    def typical_lots(self, is_bid: bool, d_ticks: float) -> float:
        """The typical level an observer of the book sees d ticks behind the touch: the
        median size of the five visible levels of the side nearest that distance (what
        the detectors' rolling median by distance bucket measures), nominal on a thin
        book. Episode sizes are multiples of this."""
        keys, book = (self.bid_ticks, self.bids) if is_bid else (self.ask_ticks, self.asks)
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
        return max(size_ratio * typical, depth_share * max(self.top_depth(is_bid, 20), self.usual_lots("top20")))

    # -- clock -------------------------------------------------------------------------
    def clock(self, t: float) -> None:
        dt = (t - self.t) / 1000.0
        self.t = t
        self.ts = self.t0 + int(t)
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

    # -- book primitives ---------------------------------------------------------------
    def set_level(self, is_bid: bool, tk: int, lots: int) -> None:
        if is_bid:
            self.depth_b += lots - level_set(self.bids, self.bid_ticks, tk, lots)
            self.changed_bids[tk] = lots
        else:
            self.depth_a += lots - level_set(self.asks, self.ask_ticks, tk, lots)
            self.changed_asks[tk] = lots

    def protected(self, is_bid: bool, tk: int) -> int:
        orders = self.special.get((is_bid, tk))
        return sum(o.rem for o in orders) if orders else 0

    def best(self, is_bid: bool) -> int:
        if is_bid:
            return self.bid_ticks[-1] if self.bid_ticks else math.floor(self.r - self.half_spread)
        return self.ask_ticks[0] if self.ask_ticks else math.ceil(self.r + self.half_spread)

    def flush(self) -> None:
        changed_bids, changed_asks = self.changed_bids, self.changed_asks
        if not changed_bids and not changed_asks:
            return
        px, qty = self.px, self.qty
        bids = tuple((px(t), qty(q)) for t, q in sorted(changed_bids.items(), reverse=True)) if changed_bids else ()
        asks = tuple((px(t), qty(q)) for t, q in sorted(changed_asks.items())) if changed_asks else ()
        changed_bids.clear()
        changed_asks.clear()
        self.out.append(BookDelta(self.ts, bids, asks))
        self.quote()

    def quote(self) -> None:
        bid_ticks, ask_ticks = self.bid_ticks, self.ask_ticks
        if bid_ticks and ask_ticks:
            bt, at = bid_ticks[-1], ask_ticks[0]
            top = (bt, self.bids[bt], at, self.asks[at])
            if top != self.top:
                self.top = top
                self.out.append(Quote(self.ts, self.px(bt), self.qty(top[1]), self.px(at), self.qty(top[3])))

    # -- orders --------------------------------------------------------------------------
    def place(self, is_bid: bool, tk: int, lots: int) -> _Order:
        """A tracked limit order (never crossing the book)."""
        lots = max(1, int(lots))
        if is_bid:
            if self.ask_ticks and tk >= self.ask_ticks[0]:
                tk = self.ask_ticks[0] - 1
            level = self.bids.get(tk, 0)
        else:
            if self.bid_ticks and tk <= self.bid_ticks[-1]:
                tk = self.bid_ticks[-1] + 1
            level = self.asks.get(tk, 0)
        order = _Order(is_bid, tk, level, lots)
        self.special.setdefault((is_bid, tk), []).append(order)
        self.set_level(is_bid, tk, level + lots)
        return order

    def queue_ahead(self, order: _Order) -> int:
        """Lots a market order must take before it reaches `order`: the better levels of its
        side and the queue ahead of it at its own price."""
        if order.is_bid:
            return sum(self.bids[t] for t in self.bid_ticks if t > order.tick) + order.ahead
        return sum(self.asks[t] for t in self.ask_ticks if t < order.tick) + order.ahead

    def move(self, order: _Order, tk: int) -> _Order | None:
        """Re-place what remains of a tracked order at tk (a pegged order following the
        touch). It stays the same order: what it was placed with and what it filled carry
        over. None when nothing of it was left to move."""
        lots = self.pull(order)
        if lots <= 0:
            return None
        moved = self.place(order.is_bid, tk, lots)
        moved.orig, moved.filled = order.orig, order.filled
        return moved

    def note_resting(self, ep: Episode, orders) -> None:
        """Record, once, how much of what `ep` placed still rests as its pull begins."""
        key = (ep.kind, ep.side, ep.start_ms)
        if key not in self.resting_at_pull:
            placed = sum(o.orig for o in orders)
            self.resting_at_pull[key] = sum(o.rem for o in orders) / placed if placed else 1.0

    def pull(self, order: _Order, fraction: float = 1.0) -> int:
        """Cancel a fraction of what remains of a tracked order; returns lots cancelled."""
        x = order.rem if fraction >= 1.0 else int(round(order.rem * fraction))
        book = self.bids if order.is_bid else self.asks
        level = book.get(order.tick, 0)
        x = min(x, level)
        if x <= 0:
            return 0
        order.rem -= x
        self.set_level(order.is_bid, order.tick, level - x)
        if order.rem <= 0:
            self._forget(order)
        return x

    def _forget(self, order: _Order) -> None:
        key = (order.is_bid, order.tick)
        orders = self.special.get(key)
        if orders and order in orders:
            orders.remove(order)
            if not orders:
                del self.special[key]

    def _consume(self, is_bid: bool, tk: int, x: int) -> None:
        orders = self.special.get((is_bid, tk))
        if not orders:
            return
        for o in list(orders):
            if x <= o.ahead:
                o.ahead -= x
            else:
                fill = min(o.rem, x - o.ahead)
                o.rem -= fill
                o.filled += fill
                o.ahead = 0
                if o.rem <= 0:
                    self._forget(o)

    def trade(self, tk: int, lots: int, taker_buy: bool) -> None:
        self.seq += 1
        self.out.append(Trade(self.ts, self.px(tk), self.qty(lots), "buy" if taker_buy else "sell",
                              f"{self.m}-{self.seq}"))

    def market(self, taker_buy: bool, lots: int, keep_levels: int = 3) -> int:
        """A market order walking the opposite side; returns lots executed."""
        is_bid = not taker_buy
        book, keys = (self.bids, self.bid_ticks) if is_bid else (self.asks, self.ask_ticks)
        left = int(lots)
        done = 0
        while left > 0 and len(keys) > keep_levels:
            tk = keys[-1] if is_bid else keys[0]
            level = book[tk]
            take = left if left < level else level
            self._consume(is_bid, tk, take)
            self.set_level(is_bid, tk, level - take)
            self.trade(tk, take, taker_buy)
            left -= take
            done += take
        return done

    def add_at(self, is_bid: bool, tk: int, lots: int) -> None:
        if is_bid:
            if self.ask_ticks and tk >= self.ask_ticks[0]:
                tk = self.ask_ticks[0] - 1
            self.set_level(True, tk, self.bids.get(tk, 0) + lots)
        else:
            if self.bid_ticks and tk <= self.bid_ticks[-1]:
                tk = self.bid_ticks[-1] + 1
            self.set_level(False, tk, self.asks.get(tk, 0) + lots)

    def grid_tick(self, is_bid: bool, d: float) -> int:
        s = _nice_floor(max(1.0, (d - self.half_spread) / self.c))
        if is_bid:
            return math.floor((self.r - d) / s) * s
        return -math.floor(-(self.r + d) / s) * s

    def top_depth(self, is_bid: bool, n: int = 10) -> int:
        if is_bid:
            return sum(self.bids[t] for t in self.bid_ticks[-n:])
        return sum(self.asks[t] for t in self.ask_ticks[:n])

    # -- background flow ---------------------------------------------------------------
    def add_random(self) -> None:
        rng = self.rng
        is_bid = rng.random() < 0.5
        k = len(self.grid) * rng.random() ** _ADD_BIAS
        d = _grid_distance(k, self.grid)
        tk = self.grid_tick(is_bid, d)
        lots = int(self.level_lots * _level_shape(k, d * self.bps_per_tick) * _ADD_SIZE * rng.lognormvariate(0.0, 0.9)) + 1
        keys = self.bid_ticks if is_bid else self.ask_ticks
        if len(keys) > self.max_levels and tk not in (self.bids if is_bid else self.asks):
            # a crowded side: join the nearest existing level instead of opening one
            i = bisect_left(keys, tk)
            if i >= len(keys) or (i > 0 and tk - keys[i - 1] < keys[i] - tk):
                i -= 1
            tk = keys[i]
        self.add_at(is_bid, tk, lots)

    def cancel_random(self) -> None:
        """Cancel on a level chosen in proportion to its size (every resting lot has the
        same hazard), the whole level or a part of it."""
        rng = self.rng
        is_bid = rng.random() < 0.5
        keys = self.bid_ticks if is_bid else self.ask_ticks
        if not keys:
            return
        book = self.bids if is_bid else self.asks
        target = rng.random() * (self.depth_b if is_bid else self.depth_a)
        acc = 0
        tk = keys[0]
        for tk in keys:
            acc += book[tk]
            if acc > target:
                break
        level = book[tk]
        prot = self.protected(is_bid, tk) if self.special else 0
        removable = level - prot
        if removable <= 0:
            return
        # one order of a typical size there, more when the side is deeper than it started
        d = abs(tk - self.r)
        shape = _level_shape(_grid_index(d, self.grid), d * self.bps_per_tick)
        size = self.level_lots * shape * _ADD_SIZE * rng.lognormvariate(0.0, 0.9)
        excess = (self.depth_b if is_bid else self.depth_a) / self.depth0
        x = min(removable, int(size * excess * excess * excess) + 1)
        if removable - x < 0.35 * self.level_lots * shape:
            x = removable  # the last orders there go together
        self.set_level(is_bid, tk, level - x)
        if prot:
            for o in self.special.get((is_bid, tk), ()):
                o.ahead = min(o.ahead, level - x - prot)

    def market_random(self) -> None:
        rng = self.rng
        p_buy = min(0.9, max(0.1, 0.5 + 0.4 * self.imb))
        buy = rng.random() < p_buy
        size = min(25.0, rng.lognormvariate(0.0, 1.1))
        lots = max(1, int(self.trade_lots * size))
        self.market(buy, lots)
        self.impact += (_IMPACT_FLOW if buy else -_IMPACT_FLOW) * self.sig_s * math.sqrt(size)

    def draw_ladders(self) -> list:
        """The pair's ladder market makers for this minute (drawn from the block's rng)."""
        rng = self.rng
        depth_lots = self.depth_lots_1pct()
        price = self.fair[0] * self._tick
        ladders = []
        for _ in range(_LADDERS):
            lo, hi = _LADDER_LEVELS
            n = int(lo * (hi / lo) ** rng.random())
            bps = sorted(rng.lognormvariate(math.log(_LADDER_BPS_MEDIAN), _LADDER_BPS_SIGMA) for _ in range(n))
            ladders.append(_Ladder([b * 1e-4 * price / self._tick for b in bps],
                                   _LADDER_TOUCH_SHARE * depth_lots, _LADDER_LEVEL_SHARE * depth_lots))
        return ladders

    def depth_lots_1pct(self) -> float:
        """The pair's nominal depth of a side within 1 % of the price, in lots."""
        prof = self.prof
        return prof.depth_usd / (self.fair[0] * self._tick * prof.usd_quote * self._lot)

    def requote(self, ladder: _Ladder) -> None:
        """Withdraw the ladder's resting quotes (what is left of them) and quote it again
        around the fair price now."""
        for is_bid, tk, lots in ladder.quotes:
            book = self.bids if is_bid else self.asks
            level = book.get(tk, 0)
            prot = self.protected(is_bid, tk) if self.special else 0
            x = min(lots, level - prot)
            if x <= 0:
                continue
            self.set_level(is_bid, tk, level - x)
            if prot:
                for o in self.special.get((is_bid, tk), ()):
                    o.ahead = min(o.ahead, level - x - prot)
        rng = self.rng
        r, hs = self.r, self.half_spread
        quotes = []
        for is_bid in (True, False):
            touch = math.floor(r - hs) if is_bid else math.ceil(r + hs)
            lots = int(ladder.touch_lots * rng.lognormvariate(0.0, 0.5)) + 1
            quotes.append((is_bid, touch, lots))
            for d in ladder.bps:
                tk = touch - math.ceil(d) if is_bid else touch + math.ceil(d)
                quotes.append((is_bid, tk, int(ladder.level_lots * rng.lognormvariate(0.0, 0.5)) + 1))
        placed = []
        for is_bid, tk, lots in quotes:
            if is_bid:
                if self.ask_ticks and tk >= self.ask_ticks[0]:
                    continue  # the ladder does not cross the book
                self.set_level(True, tk, self.bids.get(tk, 0) + lots)
            else:
                if self.bid_ticks and tk <= self.bid_ticks[-1]:
                    continue
                self.set_level(False, tk, self.asks.get(tk, 0) + lots)
            placed.append((is_bid, tk, lots))
        ladder.quotes = placed

    def crowd_taker(self) -> None:
        """A small taker order: one print at the touch."""
        rng = self.rng
        buy = rng.random() < min(0.9, max(0.1, 0.5 + 0.4 * self.imb))
        usd = _CROWD_USD * rng.lognormvariate(0.0, 1.5)
        lots = max(1, int(usd / (self.r * self._tick * self.prof.usd_quote * self._lot)))
        is_bid = not buy
        book, keys = (self.bids, self.bid_ticks) if is_bid else (self.asks, self.ask_ticks)
        if len(keys) <= 3:
            return
        tk = keys[-1] if is_bid else keys[0]
        level = book[tk]
        take = min(lots, level)
        self._consume(is_bid, tk, take)
        self.set_level(is_bid, tk, level - take)
        self.trade(tk, take, buy)

    def cross(self) -> None:
        """Orders the fair price has run over: mostly cancelled, some traded. Tracked
        (episode) orders are not cancelled by this: they stay as a wall the price has to
        wait behind until their owner pulls them (or flow eats them), and the quotes behind
        one are left as they are until it goes. Then market makers re-quote a touch that
        the price left behind."""
        r = self.r
        rng = self.rng
        ask_ticks = self.ask_ticks
        while len(ask_ticks) > 1 and ask_ticks[0] < r:
            if self._run_over(False, ask_ticks[0], rng):
                break
        bid_ticks = self.bid_ticks
        while len(bid_ticks) > 1 and bid_ticks[-1] > r:
            if self._run_over(True, bid_ticks[-1], rng):
                break
        half_spread = self.half_spread
        gap = half_spread + max(3.0, 2.0 * self.c)
        if bid_ticks and bid_ticks[-1] < r - gap and rng.random() < _FOLLOW:
            self.add_at(True, math.floor(r - half_spread), int(self.median_lots(half_spread) * rng.lognormvariate(0, 0.7)) + 1)
        if ask_ticks and ask_ticks[0] > r + gap and rng.random() < _FOLLOW:
            self.add_at(False, math.ceil(r + half_spread), int(self.median_lots(half_spread) * rng.lognormvariate(0, 0.7)) + 1)

    def _run_over(self, is_bid: bool, tk: int, rng: random.Random) -> int:
        """Settle a stale level: the background orders there are mostly cancelled, some
        traded; tracked orders stay (only market orders eat into them). Returns the
        tracked quantity left resting there."""
        book = self.bids if is_bid else self.asks
        level = book[tk]
        prot = self.protected(is_bid, tk) if self.special else 0
        background = level - prot
        if background <= 0:
            return prot
        if rng.random() < _TAKE_STALE:
            taken = max(1, int(background * rng.uniform(0.1, 0.7)))
            self.trade(tk, taken, not is_bid)
        self.set_level(is_bid, tk, prot)
        if prot:
            for o in self.special.get((is_bid, tk), ()):
                o.ahead = 0
        return prot

    def housekeeping(self) -> None:
        bid_ticks, ask_ticks = self.bid_ticks, self.ask_ticks
        b = sum(self.bids[t] for t in bid_ticks[-10:])
        a = sum(self.asks[t] for t in ask_ticks[:10])
        self.imb = (b - a) / (b + a) if a + b else 0.0
        lo = self.r - self.dmax * 1.1
        while bid_ticks and bid_ticks[0] < lo:
            tk = bid_ticks[0]
            prot = self.protected(True, tk) if self.special else 0
            if prot >= self.bids[tk]:
                break
            self.set_level(True, tk, prot)
            if prot:
                break
        hi = self.r + self.dmax * 1.1
        while ask_ticks and ask_ticks[-1] > hi:
            tk = ask_ticks[-1]
            prot = self.protected(False, tk) if self.special else 0
            if prot >= self.asks[tk]:
                break
            self.set_level(False, tk, prot)
            if prot:
                break

    def draw_book(self) -> None:
        rng = self.rng
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
                    self.set_level(is_bid, tk, lots)
                s = _nice_floor(max(1.0, (d - half_spread) / c))
                tk = ((tk - 1) // s) * s if is_bid else -((-(tk + 1)) // s) * s

    # -- the minute ------------------------------------------------------------------------
    def run(self) -> list:
        rng = self.rng
        t0 = self.t0
        self.draw_book()
        actions: list = []
        for ep in self.episodes:
            actions.extend(_episode_actions(self, ep))
        actions.sort(key=lambda a: (a[0], a[1]))
        self.changed_bids.clear()
        self.changed_asks.clear()
        self.depth0 = max(1, (self.depth_b + self.depth_a) // 2)
        self.max_levels = int(1.1 * (len(self.bid_ticks) + len(self.ask_ticks)) / 2) + 2
        px, qty = self.px, self.qty
        self.out.append(BookSnapshot(
            t0,
            tuple((px(t), qty(self.bids[t])) for t in reversed(self.bid_ticks)),
            tuple((px(t), qty(self.asks[t])) for t in self.ask_ticks),
        ))
        self.quote()
        self.housekeeping()
        self.flush()
        ladders = self.draw_ladders()
        for ladder in ladders:
            self.requote(ladder)
        self.flush()
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
        while True:
            t_next = t + expo(rate)
            while True:
                ta = actions[ai][0] if ai < n_actions else _INF
                if next_sec < 60_000.0 and next_sec <= ta and next_sec <= t_next:
                    self.clock(next_sec)
                    self.cross()
                    self.housekeeping()
                    self.flush()
                    next_sec += 1000.0
                elif ta <= t_next and ta < 60_000.0:
                    self.clock(ta)
                    self.cross()
                    self.flush()
                    actions[ai][2]()
                    self.cross()
                    self.flush()
                    ai += 1
                else:
                    break
            if t_next >= 60_000.0:
                break
            t = t_next
            self.clock(t)
            self.cross()
            self.flush()
            u = rand() * rate
            if u < ra:
                self.add_random()
            elif u < rac:
                self.cancel_random()
            elif u < racm:
                self.market_random()
            elif u < racml:
                self.requote(ladders[int(rand() * n_ladders)])
            else:
                self.crowd_taker()
            self.flush()
        return self.out


# ---------------------------------------------------------------------------------
# episodes: drawing the labels, then acting them out inside a block
# ---------------------------------------------------------------------------------
