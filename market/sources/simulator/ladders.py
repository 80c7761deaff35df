"""Market makers re-quoting ladders. Real flow (docs/DETECTION_EVALUATION.md, "Flow: real
against simulated"; measured on the Binance BTCUSDT and ETHUSDT recordings) is made mostly
of them: one depth message moves a dozen or more levels at once (p50 13-16 levels, p90
70), half of the updates delete a level and two fifths open one (the ladder moved with
the price), the levels lie 0.3-30 bps from the touch (median 5-6 bps), and the book shows
a large touch with small levels behind it. Rates are per second for a pair of liquidity 1
at activity 1; sizes are shares of the pair's depth within 1 %."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .block import _Block


_LADDERS = 6  # market makers re-quoting a ladder on each pair
_RATE_LADDER = 14.0  # ladder re-quotes a second (all market makers)
_LADDER_LEVELS = (1, 24)  # levels a side, drawn per market maker (log-uniform)
_LADDER_BPS_MEDIAN = 4.5  # distances of the levels behind the touch: lognormal, bps
_LADDER_BPS_SIGMA = 1.4
_LADDER_TOUCH_SHARE = 0.0025  # a market maker's quote at the touch, share of the depth
_LADDER_LEVEL_SHARE = 0.0006  # a level of the ladder behind the touch


class _Ladder:
    """A market maker quoting a ladder on both sides: its own touch quote and levels at
    fixed distances (bps) behind it. A re-quote moves the whole ladder to the fair price:
    one depth message of many levels."""

    __slots__ = ("bps", "touch_lots", "level_lots", "quotes")

    def __init__(self, bps: list, touch_lots: float, level_lots: float) -> None:
        self.bps, self.touch_lots, self.level_lots = bps, touch_lots, level_lots
        self.quotes: list = []  # (is_bid, tick, lots) resting now


def draw_ladders(blk: _Block) -> list:
    """The pair's ladder market makers for this minute (drawn from the block's rng)."""
    rng = blk.rng
    depth_lots = blk.depth_lots_1pct()
    tick = blk.prof.tick
    price = blk.fair[0] * tick
    ladders = []
    for _ in range(_LADDERS):
        lo, hi = _LADDER_LEVELS
        n = int(lo * (hi / lo) ** rng.random())
        bps = sorted(rng.lognormvariate(math.log(_LADDER_BPS_MEDIAN), _LADDER_BPS_SIGMA) for _ in range(n))
        ladders.append(_Ladder([b * 1e-4 * price / tick for b in bps],
                               _LADDER_TOUCH_SHARE * depth_lots, _LADDER_LEVEL_SHARE * depth_lots))
    return ladders


def requote(blk: _Block, ladder: _Ladder) -> None:
    """Withdraw the ladder's resting quotes (what is left of them) and quote it again
    around the fair price now."""
    book = blk.book
    for is_bid, tk, lots in ladder.quotes:
        level = (book.bids if is_bid else book.asks).get(tk, 0)
        prot = book.protected(is_bid, tk)
        x = min(lots, level - prot)
        if x <= 0:
            continue
        book.cancel_background(is_bid, tk, level, x, prot)
    rng = blk.rng
    r, hs = blk.r, blk.half_spread
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
        if book.crosses(is_bid, tk):
            continue  # the ladder does not cross the book
        book.set_level(is_bid, tk, (book.bids if is_bid else book.asks).get(tk, 0) + lots)
        placed.append((is_bid, tk, lots))
    ladder.quotes = placed
