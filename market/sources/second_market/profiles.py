"""The two pair classes and how a pair is assigned to one. Plain Python.

A pair's class is read from its base symbol: the few bitcoin-like bases are "sparse", the
well-known sub-dollar coins are "dense", and any other base falls to the parity of a stable
hash of the symbol, so every pair gets a class without a registry and keeps it forever."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from ..events import PairRef

SPARSE, DENSE = "sparse", "dense"
_SPARSE_BASES = frozenset({"BTC", "XBT", "WBTC", "TBTC"})
_DENSE_BASES = frozenset({"DOGE", "XRP", "ADA", "TRX", "XLM", "ALGO", "VET", "HBAR", "MATIC", "POL"})


@dataclass(frozen=True, slots=True)
class PairProfile:
    cls: str
    tick: float
    price_decimals: int
    lot: float  # quantity unit; books and trades are integer lots so sums stay exact
    qty_decimals: int
    price: float  # reference price the hourly anchors wander around
    visible_levels: int  # the feed shows the top N levels per side
    keep_levels: int  # levels kept beyond the view, so scrolling brings real levels back
    max_depth_ticks: int  # placements never go farther from the touch than this
    near_share: float  # share of adds drawn close to the touch
    near_mean_ticks: float
    far_ticks: int  # the rest land uniformly within this distance: irregular gaps
    level_lots: float  # median lots of an add at the touch
    depth_growth: float  # how much larger adds get per far_ticks of distance
    half_spread_ticks: float
    sigma_ticks_1s: float  # fair-value volatility per second
    rate_add: float  # events per second
    rate_cancel: float
    rate_market: float
    rate_requote: float
    market_lots: float  # median taker order
    target_levels: int  # levels per side the cancel pressure steers towards
    far_offset_ticks: tuple[int, int]  # where patient far orders sit


SPARSE_PROFILE = PairProfile(
    cls=SPARSE, tick=0.1, price_decimals=1, lot=0.0001, qty_decimals=4, price=60_000.0,
    visible_levels=50, keep_levels=70, max_depth_ticks=1400, near_share=0.3, near_mean_ticks=4.0,
    far_ticks=1000, level_lots=2500.0, depth_growth=1.5, half_spread_ticks=2.0, sigma_ticks_1s=8.0,
    rate_add=13.0, rate_cancel=11.0, rate_market=2.5, rate_requote=1.5, market_lots=1800.0,
    target_levels=70, far_offset_ticks=(120, 500))

DENSE_PROFILE = PairProfile(
    cls=DENSE, tick=0.0001, price_decimals=4, lot=1.0, qty_decimals=0, price=0.5,
    visible_levels=25, keep_levels=60, max_depth_ticks=70, near_share=0.6, near_mean_ticks=6.0,
    far_ticks=55, level_lots=4000.0, depth_growth=1.0, half_spread_ticks=0.25, sigma_ticks_1s=0.35,
    rate_add=42.0, rate_cancel=36.0, rate_market=6.0, rate_requote=4.0, market_lots=2500.0,
    target_levels=50, far_offset_ticks=(12, 24))


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def pair_class(pair: PairRef) -> str:
    base = pair.base.upper()
    if base in _SPARSE_BASES:
        return SPARSE
    if base in _DENSE_BASES:
        return DENSE
    return SPARSE if _digest(base) % 2 == 0 else DENSE


def profile_for(pair: PairRef) -> PairProfile:
    return SPARSE_PROFILE if pair_class(pair) == SPARSE else DENSE_PROFILE


def stream_seed(seed: int, pair: PairRef, *parts: object) -> int:
    """A seed for one (seed, pair, ...) stream that is stable across processes (no hash())."""
    return _digest("|".join(str(p) for p in (seed, pair.exchange, pair.base, pair.quote, *parts)))


def anchor_price(profile: PairProfile, seed: int, pair: PairRef, hour: int) -> float:
    """The fair price at the start of an hour: a smooth multi-scale wave seeded per pair.

    Each hour is simulated from scratch (so any window is reproducible on its own); tying
    hours to these anchors keeps the price continuous from one hour to the next."""
    h = _digest(f"{seed}|{pair.symbol}|{pair.exchange}|anchor")
    level = profile.price * (0.8 + 0.4 * ((h % 10_000) / 10_000))
    log_move = 0.0
    for i, (period, amplitude) in enumerate(((7, 0.004), (29, 0.008), (113, 0.015), (467, 0.03), (1999, 0.05))):
        phase = ((h >> (6 * i)) % 1000) / 1000 * 2 * math.pi
        log_move += amplitude * math.sin(2 * math.pi * hour / period + phase)
    return level * math.exp(log_move)
