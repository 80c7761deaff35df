"""The rows of each series metric, computed from bars. Plain Python."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

from .precision import NOISE_ONLY, Rounding


# A series names the same days and hours request after request, and formatting a date was
# a third of the cost of a row (docs/BENCHMARKS.md): each label is formatted once per process.
@lru_cache(maxsize=20_000)
def _day(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


@lru_cache(maxsize=20_000)
def _hour(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:00:00Z")


DATE_FORMAT = {"daily": _day, "hourly": _hour}


def _candlestick(r):
    o, h, lo, c, total, variance = r("open"), r("high"), r("low"), r("close"), r("price_sum"), r("price_variance")

    def values(ts_ms, trade_count, open_, high, low, close, price_mean, price_m2):
        if not trade_count:
            return None
        return {"open": o(open_), "high": h(high), "low": lo(low), "close": c(close),
                "observation_count": trade_count, "price_sum": total(price_mean * trade_count),
                "price_variance": variance(price_m2 / trade_count)}

    return values


def _limit_orders(r):
    bid_a, ask_a, bid_n, ask_n, bid_o, ask_o = (r(name) for name in (
        "bid_amount", "ask_amount", "bid_notional", "ask_notional", "bid_orders", "ask_orders"))

    def values(ts_ms, n, bid_amount, ask_amount, bid_notional, ask_notional, bid_orders, ask_orders):
        if not n:
            return None
        return {"bid_amount": bid_a(bid_amount / n), "ask_amount": ask_a(ask_amount / n),
                "bid_notional": bid_n(bid_notional / n), "ask_notional": ask_n(ask_notional / n),
                "bid_orders": bid_o(bid_orders / n), "ask_orders": ask_o(ask_orders / n)}

    return values


def _trades(r):
    v, b, s, w = r("volume"), r("buy_volume"), r("sell_volume"), r("vwap")

    def values(ts_ms, trade_count, volume, buy_volume, sell_volume, notional):
        if not trade_count:
            return None
        return {"volume": v(volume), "buy_volume": b(buy_volume), "sell_volume": s(sell_volume),
                "trade_count": trade_count, "vwap": w(notional / volume if volume else None)}

    return values


def _spread(r):
    bid_r, ask_r, mid_r, bps, avg, lo, hi = (r(name) for name in (
        "bid_price", "ask_price", "mid_price", "spread_bps", "spread_bps_avg", "spread_bps_min", "spread_bps_max"))

    def values(ts_ms, quote_count, bid, ask, bps_sum, bps_min, bps_max):
        if not quote_count:
            return None
        mid = (bid + ask) / 2 if bid is not None and ask is not None else None
        return {"bid_price": bid_r(bid), "ask_price": ask_r(ask), "mid_price": mid_r(mid),
                "spread_bps": bps((ask - bid) / mid * 10_000 if mid else None),
                "spread_bps_avg": avg(bps_sum / quote_count), "spread_bps_min": lo(bps_min),
                "spread_bps_max": hi(bps_max)}

    return values


# Each metric's row is computed straight from its stored columns (the hot loop of a series:
# building a Bar per row and rounding through a dict cost three quarters of a 720-row
# answer, docs/BENCHMARKS.md). The values are Bar's derived figures (vwap, price_sum,
# price_variance, mid_price, spread_bps: market/bars.py) as market/precision.py serves them.
# "columns": the stored bar fields a metric's rows read (ts_ms first); the others are not
# fetched (the whole bar is three times the columns and most of a request's fetch)
METRICS = {
    "candlestick": {"row": _candlestick, "sides": ["ohlc"], "columns": (
        "ts_ms", "trade_count", "open", "high", "low", "close", "price_mean", "price_m2")},
    "limit_orders": {"row": _limit_orders, "sides": ["bid", "ask"], "columns": (
        "ts_ms", "book_samples", "bid_amount_sum", "ask_amount_sum", "bid_notional_sum", "ask_notional_sum",
        "bid_orders_sum", "ask_orders_sum")},
    "trades": {"row": _trades, "sides": ["buy", "sell"], "columns": (
        "ts_ms", "trade_count", "volume", "buy_volume", "sell_volume", "notional")},
    "spread": {"row": _spread, "sides": ["bid", "ask"], "columns": (
        "ts_ms", "quote_count", "bid_price", "ask_price", "spread_bps_sum", "spread_bps_min", "spread_bps_max")},
}
LIMIT_ORDER_SIDES = {
    "bid": ("bid_amount", "bid_notional", "bid_orders"),
    "ask": ("ask_amount", "ask_notional", "ask_orders"),
}


def row_maker(metric: str, resolution: str, *, keep: tuple[str, ...] | None = None,
              rounding: Rounding = NOISE_ONLY):
    """A function from a tuple of the metric's stored columns (METRICS[metric]["columns"])
    to its series row, or None for a bar with no data for the metric. `keep` restricts the
    columns (limit-orders `side`)."""
    values, fmt = METRICS[metric]["row"](rounding.rounder), DATE_FORMAT[resolution]
    if keep is None:
        def make(stored):
            found = values(*stored)
            return None if found is None else {"date": fmt(stored[0]), **found}
    else:
        def make(stored):
            found = values(*stored)
            return None if found is None else {"date": fmt(stored[0]), **{k: found[k] for k in keep}}
    return make


def rows(stored, metric: str, resolution: str, *, keep: tuple[str, ...] | None = None,
         rounding: Rounding = NOISE_ONLY) -> list[dict]:
    """Series rows for tuples of the metric's stored columns, skipping bars with no data
    for the metric."""
    make = row_maker(metric, resolution, keep=keep, rounding=rounding)
    return [row for row in map(make, stored) if row is not None]
