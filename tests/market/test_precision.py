"""Rounding a column on arrays (Rounding.column) gives, value for value and bit for bit, what
the field's rule gives one value at a time: the 24-hour snapshot depends on it."""

import math
import random
import struct

import pytest

from market.precision import Rounding

FIELDS = ["open", "mid_price", "volume", "vwap", "imbalance", "spread_bps", "bid_orders", "trade_count"]
INCREMENTS = [(None, None), ("0.01", "0.00001"), ("1", "1"), ("0.00000001", "0.001"), ("0.5", "0.1")]
# exact halves, values a hair from a half or a power of ten, zeros of both signs, the largest
# and smallest magnitudes: where arithmetic on arrays could part from Python's rounding
HARD = [0.0, -0.0, 0.125, 2.675, 1.005, 0.5, 1.5, 2.5, -2.5, 1e-3, 1e-5, 10.0, 100.0, 1e15, 1e16, 1e22, 1e23,
        9.9999999999, 0.99999999995, 999999.99995, 5e-324, 1.7976931348623157e308, -1e300, math.inf, -math.inf]


def _values(rng: random.Random, n: int) -> list[float]:
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.2:
            value = round(rng.uniform(-1e5, 1e5), rng.randint(0, 9)) + rng.choice([0, 0.5, 5e-3, 5e-5, 5e-9])
        elif r < 0.3:
            value = rng.choice(HARD)
        elif r < 0.5:  # any bit pattern but NaN (never stored)
            value = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
            value = 0.0 if value != value else value
        elif r < 0.6:
            value = math.nextafter(10.0 ** rng.randint(-30, 30) * rng.choice([1, -1]), rng.choice([0, math.inf]))
        else:
            value = rng.uniform(-1, 1) * 10 ** rng.uniform(-12, 18)
        out.append(value)
    return out


def _same(a, b) -> bool:
    return type(a) is type(b) and (a == b and math.copysign(1, a) == math.copysign(1, b) if isinstance(a, float)
                                   else a == b)


@pytest.mark.parametrize("increments", INCREMENTS, ids=str)
def test_a_column_rounded_on_arrays_is_each_value_rounded_by_its_rule(increments):
    rng = random.Random(str(increments))
    rounding = Rounding(*increments)
    for name in FIELDS:
        values = _values(rng, 5_000) + HARD
        one = rounding.rounder(name)
        got = rounding.column(name, values)
        wrong = [(value, one(value), mine) for value, mine in zip(values, got) if not _same(one(value), mine)]
        assert wrong == [], wrong[:5]
