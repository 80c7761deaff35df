"""The background order flow of a minute, one event per call, each drawn from the block's
rng and applied to its book: limit orders (biased to the touch, on the price grid),
cancels (every resting lot has the same hazard), market orders walking the book (they
push the impact) and a crowd of small takers printing at the touch."""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import TYPE_CHECKING

from .profiles import _grid_distance, _level_shape

if TYPE_CHECKING:
    from .block import _Block


_ADD_BIAS = 1.5  # adds at level index n_levels * u ** _ADD_BIAS: more near the touch
_ADD_SIZE = 0.55  # median add, relative to the median level size at that distance
_IMPACT_FLOW = 0.15  # kick of one typical market order, in per-second sigmas
# Real trades are many and small (docs/DETECTION_EVALUATION.md, "Flow: real against
# simulated"): 18-28 prints a second, median notional about $35. The rate is per second for
# a pair of liquidity 1 at activity 1.
_RATE_CROWD = 18.0  # small taker orders a second, each one print at the touch
_CROWD_USD = 30.0  # their median notional (lognormal, sigma 1.5)


def add_limit(blk: _Block) -> None:
    """A limit order on a random side, at a grid position biased to the touch."""
    rng = blk.rng
    book = blk.book
    is_bid = rng.random() < 0.5
    k = len(blk.grid) * rng.random() ** _ADD_BIAS
    d = _grid_distance(k, blk.grid)
    tk = blk.grid_tick(is_bid, d)
    lots = int(blk.level_lots * _level_shape(k, d * blk.bps_per_tick) * _ADD_SIZE * rng.lognormvariate(0.0, 0.9)) + 1
    levels, keys = book.side(is_bid)
    if len(keys) > blk.max_levels and tk not in levels:
        # a crowded side: join the nearest existing level instead of opening one
        i = bisect_left(keys, tk)
        if i >= len(keys) or (i > 0 and tk - keys[i - 1] < keys[i] - tk):
            i -= 1
        tk = keys[i]
    book.add_at(is_bid, tk, lots)


def cancel_limit(blk: _Block) -> None:
    """Cancel on a level chosen in proportion to its size (every resting lot has the
    same hazard), the whole level or a part of it."""
    rng = blk.rng
    book = blk.book
    is_bid = rng.random() < 0.5
    levels, keys = book.side(is_bid)
    if not keys:
        return
    target = rng.random() * (book.depth_b if is_bid else book.depth_a)
    acc = 0
    tk = keys[0]
    for tk in keys:
        acc += levels[tk]
        if acc > target:
            break
    level = levels[tk]
    prot = book.protected(is_bid, tk)
    removable = level - prot
    if removable <= 0:
        return
    # one order of a typical size there, more when the side is deeper than it started
    shape = blk.level_shape_at(abs(tk - blk.r))
    size = blk.level_lots * shape * _ADD_SIZE * rng.lognormvariate(0.0, 0.9)
    excess = (book.depth_b if is_bid else book.depth_a) / blk.depth0
    x = min(removable, int(size * excess * excess * excess) + 1)
    if removable - x < 0.35 * blk.level_lots * shape:
        x = removable  # the last orders there go together
    book.cancel_background(is_bid, tk, level, x, prot)


def market_order(blk: _Block) -> None:
    """A market order walking the book; its flow pushes the impact (price) its way."""
    rng = blk.rng
    buy = rng.random() < blk.buy_probability()
    size = min(25.0, rng.lognormvariate(0.0, 1.1))
    lots = max(1, int(blk.trade_lots * size))
    blk.book.market(buy, lots)
    blk.impact += (_IMPACT_FLOW if buy else -_IMPACT_FLOW) * blk.sig_s * math.sqrt(size)


def crowd_taker(blk: _Block) -> None:
    """A small taker order: one print at the touch."""
    rng = blk.rng
    book = blk.book
    buy = rng.random() < blk.buy_probability()
    usd = _CROWD_USD * rng.lognormvariate(0.0, 1.5)
    prof = blk.prof
    lots = max(1, int(usd / (blk.r * prof.tick * prof.usd_quote * prof.lot)))
    is_bid = not buy
    levels, keys = book.side(is_bid)
    if len(keys) <= 3:
        return
    tk = keys[-1] if is_bid else keys[0]
    level = levels[tk]
    book.take(is_bid, tk, level, min(lots, level), buy)
