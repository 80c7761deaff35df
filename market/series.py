"""The rows of each series metric, computed from bars. Plain Python."""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

from .bars import Bar
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


def _ratio(total: float, count: int) -> float | None:
    return total / count if count else None


def candlestick(bar: Bar) -> dict | None:
    if not bar.trade_count:
        return None
    return {"open": bar.open, "high": bar.high, "low": bar.low, "close": bar.close,
            "observation_count": bar.trade_count, "price_sum": bar.price_sum,
            "price_variance": bar.price_variance}


def limit_orders(bar: Bar) -> dict | None:
    if not bar.book_samples:
        return None
    n = bar.book_samples
    return {"bid_amount": bar.bid_amount_sum / n, "ask_amount": bar.ask_amount_sum / n,
            "bid_notional": bar.bid_notional_sum / n, "ask_notional": bar.ask_notional_sum / n,
            "bid_orders": bar.bid_orders_sum / n, "ask_orders": bar.ask_orders_sum / n}


def trades(bar: Bar) -> dict | None:
    if not bar.trade_count:
        return None
    return {"volume": bar.volume, "buy_volume": bar.buy_volume, "sell_volume": bar.sell_volume,
            "trade_count": bar.trade_count, "vwap": bar.vwap}


def spread(bar: Bar) -> dict | None:
    if not bar.quote_count:
        return None
    return {"bid_price": bar.bid_price, "ask_price": bar.ask_price, "mid_price": bar.mid_price,
            "spread_bps": bar.spread_bps, "spread_bps_avg": _ratio(bar.spread_bps_sum, bar.quote_count),
            "spread_bps_min": bar.spread_bps_min, "spread_bps_max": bar.spread_bps_max}


# "columns": the stored bar fields a metric's rows read (ts_ms first); the others are not
# fetched (the whole bar is three times the columns and most of a request's fetch)
METRICS = {
    "candlestick": {"row": candlestick, "sides": ["ohlc"], "columns": (
        "ts_ms", "trade_count", "open", "high", "low", "close", "price_mean", "price_m2")},
    "limit_orders": {"row": limit_orders, "sides": ["bid", "ask"], "columns": (
        "ts_ms", "book_samples", "bid_amount_sum", "ask_amount_sum", "bid_notional_sum", "ask_notional_sum",
        "bid_orders_sum", "ask_orders_sum")},
    "trades": {"row": trades, "sides": ["buy", "sell"], "columns": (
        "ts_ms", "trade_count", "volume", "buy_volume", "sell_volume", "notional")},
    "spread": {"row": spread, "sides": ["bid", "ask"], "columns": (
        "ts_ms", "quote_count", "bid_price", "ask_price", "spread_bps_sum", "spread_bps_min", "spread_bps_max")},
}
LIMIT_ORDER_SIDES = {
    "bid": ("bid_amount", "bid_notional", "bid_orders"),
    "ask": ("ask_amount", "ask_notional", "ask_orders"),
}


def rows(bars, metric: str, resolution: str, *, keep: tuple[str, ...] | None = None,
         rounding: Rounding = NOISE_ONLY) -> list[dict]:
    """Series rows for the bars, skipping bars with no data for the metric. `keep`
    restricts the columns (limit-orders `side`)."""
    build, fmt = METRICS[metric]["row"], DATE_FORMAT[resolution]
    out = []
    for bar in bars:
        values = build(bar)
        if values is None:
            continue
        if keep is not None:
            values = {k: values[k] for k in keep}
        out.append({"date": fmt(bar.ts_ms), **rounding.row(values)})
    return out
