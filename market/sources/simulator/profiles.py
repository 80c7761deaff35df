"""A pair's book profile (tick, grid, level sizes, event rates) and the shapes it is drawn
from: a grid one tick wide near the touch and coarser away from it, and the daily cycle."""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

from market.bars import SECOND_MS
from market.sources.events import BookDelta, BookSnapshot, PairRef, Trade

from .flow import _nice_floor


@dataclass
class _Profile:
    pair: PairRef
    key: str
    p0: float
    usd_quote: float
    tick: float
    pdec: int
    lot: float
    qdec: int
    liquidity: float  # pair activity 0.15..1.2
    rate_scale: float
    sigma_daily: float
    c: float  # grid width: spacing at distance d from the reference is nice_floor((d - half_spread) / c) ticks
    half_spread: float  # half spread, ticks
    n_levels: int
    level_usd: float  # median notional of a mid-book level
    trade_usd: float  # median market order notional
    tick_scale: float  # >= 1: how many ticks make a "tick" of the thresholds on fast, fine-tick pairs
    grid: list  # distances (ticks) of the grid positions from the reference price, best first
    depth_usd: float  # nominal notional of a side within 1 % of the price


def _grid_walk(c: float, half_spread: float, d_max: float) -> list:
    """Distances (ticks from the reference price) of the price-grid positions on one side
    within d_max ticks, best first: the walk the snapshot makes, one tick apart near the
    touch and coarser further out."""
    r = half_spread + 0.5
    tk = math.floor(r - half_spread)
    out = []
    while r - tk <= d_max:
        out.append(r - tk)
        s = _nice_floor(max(1.0, (r - tk - half_spread) / c))
        tk = ((tk - 1) // s) * s
    return out


def _grid_count(c: float, half_spread: float, d_max: float) -> int:
    """Price-grid positions on one side within d_max ticks of the reference price."""
    return len(_grid_walk(c, half_spread, d_max))


_OCCUPANCY = 0.85  # share of grid positions holding a level in a fresh book


def _solve_c(span_ticks: float, half_spread: float, n_levels: int) -> float:
    """The width c of the grid that gives about n_levels levels within span_ticks."""
    target = n_levels / _OCCUPANCY
    if _grid_count(span_ticks + 1.0, half_spread, span_ticks) <= target:
        return max(1.0, span_ticks)
    lo, hi = 0.05, max(1.0, span_ticks)
    for _ in range(50):
        c = math.sqrt(lo * hi)
        if _grid_count(c, half_spread, span_ticks) > target:
            hi = c
        else:
            lo = c
    return max(0.05, lo)


# base rates per second for a pair of liquidity 1 at activity 1
_RATE_ADD = 9.0
_RATE_CANCEL = 5.6
_RATE_MO = 2.2


# ---------------------------------------------------------------------------------
# what a block's events hold (calibration)
# ---------------------------------------------------------------------------------


def _usual_book(events: list, pair: PairRef, lot: float) -> dict:
    """What a rolling baseline of the book sees in a block's events, in lots: the medians of
    a side's top-10 depth, top-20 depth and best level (both sides, sampled every second)
    and of the taker volume per second."""
    from market.sources.bar_builder import BarBuilder  # local: keeps the import graph flat

    replay = BarBuilder(pair)
    samples: dict = {"top10": [], "top20": [], "touch": []}
    taker: dict = {}
    next_ms = None
    for ev in events:
        replay.feed(ev)
        if isinstance(ev, Trade):
            sec = ev.ts_ms // SECOND_MS
            taker[sec] = taker.get(sec, 0.0) + ev.qty / lot
            continue
        if not isinstance(ev, (BookSnapshot, BookDelta)):
            continue
        if next_ms is None:
            next_ms = ev.ts_ms
        if ev.ts_ms >= next_ms:
            next_ms += SECOND_MS
            for levels in replay.book():
                samples["top10"].append(sum(q for _p, q in levels[:10]) / lot)
                samples["top20"].append(sum(q for _p, q in levels[:20]) / lot)
                samples["touch"].append(levels[0][1] / lot if levels else 0.0)
    out = {key: _median(vals) for key, vals in samples.items()}
    if events:
        seconds = range(events[0].ts_ms // SECOND_MS, events[-1].ts_ms // SECOND_MS + 1)
        out["taker_second"] = _median([taker.get(sec, 0.0) for sec in seconds])
    else:
        out["taker_second"] = 0.0
    return out


def _median(vals: list) -> float:
    vals = sorted(vals)
    return vals[len(vals) // 2] if vals else 0.0


def _grid_distances(c: float, half_spread: float, d_max: float) -> list:
    """The grid of a pair's book: `_grid_walk`, never empty."""
    return _grid_walk(c, half_spread, d_max) or [half_spread]


def _grid_index(d: float, grid: list) -> float:
    """The (continuous) position index of distance d ticks on a grid of distances."""
    i = bisect_left(grid, d)
    if i == 0:
        return 0.0
    if i >= len(grid):
        return float(len(grid) - 1) + (d - grid[-1]) / max(1.0, grid[-1] - grid[-2] if len(grid) > 1 else 1.0)
    lo, hi = grid[i - 1], grid[i]
    return i - 1 + (d - lo) / (hi - lo)


def _grid_distance(k: float, grid: list) -> float:
    """Distance of the (continuous) position index k: inverse of _grid_index."""
    if k <= 0:
        return grid[0]
    i = int(k)
    if i >= len(grid) - 1:
        return grid[-1]
    return grid[i] + (grid[i + 1] - grid[i]) * (k - i)


_INF_BPS = float("inf")


def _level_shape(k: float, d_bps: float = _INF_BPS) -> float:
    """Median level size by grid index (and distance from the price, bps), relative to a
    mid-book level. Real books are thin near the touch (the recordings' depth within 1, 5
    and 10 bps is 0.14, 0.2 and 0.3 of what a flat book of the same depth at 50 bps would
    show): the resting size tapers from a tenth at the touch to full size at 27 bps."""
    return (0.35 + 0.65 * (1.0 - math.exp(-k / 6.0))) * (1.0 + k / 40.0) * min(1.0, 0.1 + d_bps / 30.0)


def _cycle_mean() -> float:
    total = 0.0
    for i in range(24 * 60):
        h = i / 60
        total += (0.5 + 1.1 * math.exp(-(((h - 17.0) / 4.0) ** 2)) + 0.25 * math.exp(-(((h - 3.0) / 3.0) ** 2))
                  + 1.1 * math.exp(-(((h + 7.0) / 4.0) ** 2)) + 0.25 * math.exp(-(((h - 27.0) / 3.0) ** 2)))
    return total / (24 * 60)


_CYCLE_MEAN = _cycle_mean()
