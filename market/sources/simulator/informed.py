"""Informed flow: when the reference price moves through resting orders they are stale,
mostly cancelled and partly taken; and market makers re-quote a touch the price has left
behind. Runs after every event of the minute (the price may have moved)."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .block import _Block


_TAKE_STALE = 0.12  # share of orders run over by the fair price that are traded, not cancelled
_FOLLOW = 0.12  # chance per event that a market maker re-quotes a touch left behind


def cross(blk: _Block) -> None:
    """Orders the fair price has run over: mostly cancelled, some traded. Tracked
    (episode) orders are not cancelled by this: they stay as a wall the price has to
    wait behind until their owner pulls them (or flow eats them), and the quotes behind
    one are left as they are until it goes. Then market makers re-quote a touch that
    the price left behind."""
    r = blk.r
    rng = blk.rng
    book = blk.book
    ask_ticks = book.ask_ticks
    while len(ask_ticks) > 1 and ask_ticks[0] < r:
        if _run_over(blk, False, ask_ticks[0], rng):
            break
    bid_ticks = book.bid_ticks
    while len(bid_ticks) > 1 and bid_ticks[-1] > r:
        if _run_over(blk, True, bid_ticks[-1], rng):
            break
    half_spread = blk.half_spread
    gap = half_spread + max(3.0, 2.0 * blk.c)
    if bid_ticks and bid_ticks[-1] < r - gap and rng.random() < _FOLLOW:
        book.add_at(True, math.floor(r - half_spread), int(blk.median_lots(half_spread) * rng.lognormvariate(0, 0.7)) + 1)
    if ask_ticks and ask_ticks[0] > r + gap and rng.random() < _FOLLOW:
        book.add_at(False, math.ceil(r + half_spread), int(blk.median_lots(half_spread) * rng.lognormvariate(0, 0.7)) + 1)


def _run_over(blk: _Block, is_bid: bool, tk: int, rng: random.Random) -> int:
    """Settle a stale level: the background orders there are mostly cancelled, some
    traded; tracked orders stay (only market orders eat into them). Returns the
    tracked quantity left resting there."""
    book = blk.book
    level = (book.bids if is_bid else book.asks)[tk]
    prot = book.protected(is_bid, tk)
    background = level - prot
    if background <= 0:
        return prot
    if rng.random() < _TAKE_STALE:
        taken = max(1, int(background * rng.uniform(0.1, 0.7)))
        book.trade(tk, taken, not is_bid)
    book.set_level(is_bid, tk, prot)
    if prot:
        for o in book.special.get((is_bid, tk), ()):
            o.ahead = 0
    return prot
