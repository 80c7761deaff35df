"""Bar aggregates: mergeable, so minute, hour and day bars are exact roll-ups of second
bars. Plain Python.

Trades: count, first/last/min/max price, volumes, notional, and the price mean and M2
(sum of squared deviations) merged with Chan's formula, so the variance of a day's trade
prices is exact and numerically stable however the day was cut into bars.
Book: one sample per second (the book as it stood at the end of the second): depth within
1 % of mid on each side, in base quantity, quote notional and resting levels.
Quote: the last best bid/ask of the bar and the spread statistics over quote updates."""

from __future__ import annotations

from dataclasses import dataclass, fields

SECOND_MS, MINUTE_MS, HOUR_MS, DAY_MS = 1_000, 60_000, 3_600_000, 86_400_000
GRANULARITY_MS = {"second": SECOND_MS, "minute": MINUTE_MS, "hour": HOUR_MS, "day": DAY_MS}


@dataclass(slots=True)
class Bar:
    ts_ms: int
    # trades
    trade_count: int = 0
    open: float | None = None
    high: float | None = None
    low: float | None = None
    close: float | None = None
    volume: float = 0.0
    buy_volume: float = 0.0
    sell_volume: float = 0.0
    notional: float = 0.0
    price_mean: float = 0.0
    price_m2: float = 0.0
    # book, sampled once a second
    book_samples: int = 0
    bid_amount_sum: float = 0.0
    ask_amount_sum: float = 0.0
    bid_notional_sum: float = 0.0
    ask_notional_sum: float = 0.0
    bid_orders_sum: int = 0
    ask_orders_sum: int = 0
    # quotes
    quote_count: int = 0
    bid_price: float | None = None
    ask_price: float | None = None
    spread_bps_sum: float = 0.0
    spread_bps_min: float | None = None
    spread_bps_max: float | None = None

    # -- derived values served by the API -------------------------------------------
    @property
    def vwap(self) -> float | None:
        return self.notional / self.volume if self.volume else None

    @property
    def price_sum(self) -> float:
        return self.price_mean * self.trade_count

    @property
    def price_variance(self) -> float | None:
        """Population variance of the trade prices in the bar."""
        return self.price_m2 / self.trade_count if self.trade_count else None

    @property
    def bid_depth(self) -> float | None:
        return self.bid_amount_sum / self.book_samples if self.book_samples else None

    @property
    def ask_depth(self) -> float | None:
        return self.ask_amount_sum / self.book_samples if self.book_samples else None

    @property
    def imbalance(self) -> float | None:
        if not self.book_samples or not (self.bid_amount_sum + self.ask_amount_sum):
            return None
        return (self.bid_amount_sum - self.ask_amount_sum) / (self.bid_amount_sum + self.ask_amount_sum)

    @property
    def mid_price(self) -> float | None:
        if self.bid_price is None or self.ask_price is None:
            return None
        return (self.bid_price + self.ask_price) / 2

    @property
    def spread_bps(self) -> float | None:
        mid = self.mid_price
        return (self.ask_price - self.bid_price) / mid * 10_000 if mid else None


BAR_FIELDS = tuple(f.name for f in fields(Bar))


def merge(bars, ts_ms: int) -> Bar:
    """One bar starting at ts_ms from consecutive bars given in time order."""
    out = Bar(ts_ms=ts_ms)
    for bar in bars:
        if bar.trade_count:
            if out.trade_count == 0:
                out.open, out.high, out.low = bar.open, bar.high, bar.low
                out.price_mean, out.price_m2 = bar.price_mean, bar.price_m2
            else:
                out.high = max(out.high, bar.high)
                out.low = min(out.low, bar.low)
                n_a, n_b = out.trade_count, bar.trade_count
                n = n_a + n_b
                delta = bar.price_mean - out.price_mean
                out.price_mean += delta * n_b / n
                out.price_m2 += bar.price_m2 + delta * delta * n_a * n_b / n
            out.close = bar.close
            _add(out, bar, _TRADE_SUMS)
        if bar.book_samples:
            _add(out, bar, _BOOK_SUMS)
        if bar.quote_count:
            out.quote_count += bar.quote_count
            out.bid_price, out.ask_price = bar.bid_price, bar.ask_price
            out.spread_bps_sum += bar.spread_bps_sum
            out.spread_bps_min = bar.spread_bps_min if out.spread_bps_min is None else min(out.spread_bps_min, bar.spread_bps_min)
            out.spread_bps_max = bar.spread_bps_max if out.spread_bps_max is None else max(out.spread_bps_max, bar.spread_bps_max)
    return out


_TRADE_SUMS = ("trade_count", "volume", "buy_volume", "sell_volume", "notional")
_BOOK_SUMS = ("book_samples", "bid_amount_sum", "ask_amount_sum", "bid_notional_sum", "ask_notional_sum",
              "bid_orders_sum", "ask_orders_sum")


def _add(out: Bar, bar: Bar, names: tuple[str, ...]) -> None:
    for name in names:
        setattr(out, name, getattr(out, name) + getattr(bar, name))


def floor_ms(ts_ms: int, granularity: str) -> int:
    step = GRANULARITY_MS[granularity]
    return ts_ms - ts_ms % step
