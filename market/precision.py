"""Numbers as served: no binary float noise, prices and quantities at the instrument's
precision. Plain Python.

Rules (JSON, TOON and SSE alike, every path that serves bars):
* Prices (open, high, low, close, bid_price, ask_price) are rounded to the decimals of the
  pair's price increment (0.01 -> 2 decimals); mid_price to one decimal more (the half
  tick is exact). Quantities in the base asset (volume, buy_volume, sell_volume,
  bid_depth, ask_depth, bid_amount, ask_amount) to the decimals of its amount increment.
  A pair whose increments are not known yet gets 10 significant digits for both.
* Derived figures are rounded to significant digits: vwap, price_sum and notionals to 10
  (a price-weighted mean is finer than the tick, and 10 digits hold it), spread_bps,
  imbalance, price_variance and the mean order counts to 6 (ratios measured from floats
  carry no more).
* Counts and timestamps are integers already; None stays None.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

PRICES = ("open", "high", "low", "close", "bid_price", "ask_price")
AMOUNTS = ("volume", "buy_volume", "sell_volume", "bid_depth", "ask_depth", "bid_amount", "ask_amount")
SIGNIFICANT = {"vwap": 10, "price_sum": 10, "bid_notional": 10, "ask_notional": 10,
               "spread_bps": 6, "spread_bps_avg": 6, "spread_bps_min": 6, "spread_bps_max": 6,
               "imbalance": 6, "price_variance": 6, "bid_orders": 6, "ask_orders": 6}
UNKNOWN_DIGITS = 10


def decimals_of(increment) -> int | None:
    """0.01 -> 2, 1 -> 0, 0.5 -> 1; None when unknown."""
    if increment is None:
        return None
    exponent = Decimal(str(increment)).normalize().as_tuple().exponent
    return max(-exponent, 0)


def significant(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def _unchanged(value):
    return value


class Rounding:
    """Rounds a served row in place (see the module's rules)."""

    __slots__ = ("price_decimals", "amount_decimals", "_plan")

    def __init__(self, price_increment=None, amount_increment=None):
        self.price_decimals = decimals_of(price_increment)
        self.amount_decimals = decimals_of(amount_increment)
        plan = {}
        for name in PRICES:
            plan[name] = ("d", self.price_decimals) if self.price_decimals is not None else ("s", UNKNOWN_DIGITS)
        plan["mid_price"] = (("d", self.price_decimals + 1) if self.price_decimals is not None
                             else ("s", UNKNOWN_DIGITS))
        for name in AMOUNTS:
            plan[name] = ("d", self.amount_decimals) if self.amount_decimals is not None else ("s", UNKNOWN_DIGITS)
        for name, digits in SIGNIFICANT.items():
            plan[name] = ("s", digits)
        self._plan = plan

    def row(self, row: dict) -> dict:
        plan = self._plan
        for name, value in row.items():
            rule = plan.get(name)
            if rule is None or value is None or value.__class__ is int:
                continue
            how, digits = rule
            row[name] = round(value, digits) if how == "d" else (significant(value, digits) if value else 0.0)
        return row

    def rounder(self, name: str):
        """The rule `row` applies to the field `name`, as a function of one value."""
        rule = self._plan.get(name)
        if rule is None:
            return _unchanged
        how, digits = rule
        if how == "d":
            return lambda value: value if value is None or value.__class__ is int else round(value, digits)
        return lambda value: (value if value is None or value.__class__ is int
                              else significant(value, digits) if value else 0.0)

    def column(self, name: str, values: list[float]) -> list:
        """`[self.rounder(name)(v) for v in values]` for a list of floats, computed on arrays
        (a 24-hour snapshot rounds over a million values).

        Exactness: Python rounds the exact binary value to the decimal position, then takes
        the double nearest that decimal. Here y = x * 10^k (or x / 10^-k) is within half an
        ulp of the exact product, so rint(y) is the same integer m unless y lies within two
        ulps of a half; m / 10^k (or m * 10^-k), one IEEE operation on exact operands, is the
        double nearest m * 10^-k. Values where that argument does not hold (near a half,
        |y| >= 2^52, |k| > 22, not finite, and for significant digits a value within 1e-9 of
        a power of ten in log10) are rounded by Python, one by one."""
        rule = self._plan.get(name)
        if rule is None or not values:
            return values
        how, digits = rule
        with np.errstate(all="ignore"):  # what overflows or is not finite is rounded by Python below
            result, unsure = self._column(how, digits, np.array(values, dtype=np.float64))
        if unsure.any():
            one = self.rounder(name)
            for i in np.flatnonzero(unsure).tolist():
                result[i] = one(values[i])
        return result

    @staticmethod
    def _column(how: str, digits: int, x: np.ndarray) -> tuple[list, np.ndarray]:
        if how == "d":
            k = np.full(x.shape, digits)
            unsure = np.zeros(x.shape, dtype=bool)
        else:
            nonzero = x != 0
            magnitude = np.log10(np.abs(np.where(nonzero, x, 1.0)))
            unsure = nonzero & (np.abs(magnitude - np.rint(magnitude)) < 1e-9)  # zero is served as 0.0 below
            k = (digits - 1 - np.floor(magnitude)).astype(np.int64)
        unsure |= (k > 22) | (k < -22) | ~np.isfinite(x)
        k = np.where(unsure, 0, k)
        scale = 10.0 ** np.abs(k)
        up = k >= 0
        y = np.where(up, x * scale, x / scale)
        n = np.rint(y)
        half_away = np.abs(np.abs(y - np.trunc(y)) - 0.5)
        unsure |= ~(np.abs(y) < 2.0 ** 52) | (half_away <= 2 * np.spacing(np.abs(y)))
        out = np.where(up, n / scale, n * scale)
        if how == "s":
            out = np.where(nonzero, out, 0.0)  # zero (either sign) is served as 0.0
        return out.tolist(), unsure

    def price(self, value: float | None) -> float | None:
        return self.row({"close": value})["close"]

    def amount(self, value: float | None) -> float | None:
        return self.row({"volume": value})["volume"]


NOISE_ONLY = Rounding()
