"""The fair price path: value-noise octaves on log price, assets as a common crypto factor
plus their own path, and the tick, activity and volatility tables of assets, quotes and
exchanges."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from market.bars import DAY_MS


_M64 = (1 << 64) - 1
_SQRT3 = math.sqrt(3.0)


def stable_hash(*parts) -> int:
    """64-bit hash of the parts' text, stable across processes and Python versions."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def _mix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


_SEC_PERIODS = (20, 80, 320, 1280, 5120, 20480, 81920, 327680, 1310720, 5242880, 20971520)
_PERIODS_MS = tuple(p * 1000 for p in _SEC_PERIODS)  # factor 4 apart: 20 s .. ~243 days
_LONG_MS = 16 * DAY_MS
_NOISE_GAIN = 0.55  # calibrates octave amplitudes to the requested daily volatility


class _Octaves:
    """Sum of value-noise octaves: knots are uniform (unit variance) from a 64-bit mix of
    (key, octave, knot index), joined by a quintic smoothstep. value(t) needs no history."""

    __slots__ = ("_oct", "_cache")

    def __init__(self, key: int, sigma_daily: float, periods_ms=_PERIODS_MS, regime_max_ms=DAY_MS, max_period_ms=None):
        octs = []
        for j, period in enumerate(periods_ms):
            if max_period_ms is not None and period > max_period_ms:
                continue
            # random-walk scaling up to ~16 days, flat beyond: prices wander, but stay
            # within a plausible band around the reference over years
            amp = sigma_daily * math.sqrt(min(period, _LONG_MS) / DAY_MS) * _NOISE_GAIN
            octs.append((period, amp, _mix64(key ^ (j + 1) * 0x632BE59BD9B4E019 & _M64), period <= regime_max_ms))
        self._oct = tuple(octs)
        self._cache: dict = {}

    def value(self, t: int, regime: float = 1.0, min_period_ms: int = 0) -> float:
        return self.values([t], [regime], min_period_ms)[0]

    def values(self, ts: list, regimes: list | None = None, min_period_ms: int = 0) -> list:
        """value(t) for many times at once (knots are reused between neighbouring times)."""
        n = len(ts)
        out = [0.0] * n
        scale = 5.421010862427522e-20 * 2 * _SQRT3
        m64 = _M64
        sqrt3 = _SQRT3
        for period, amp, key, regimed in self._oct:
            if period < min_period_ms:
                continue
            inv = 1.0 / period
            last = -(1 << 62)
            a0 = ad = k1 = 0.0
            reg = regimes if regimed and regimes is not None else None
            for j in range(n):
                t = ts[j]
                i = t // period
                if i != last:
                    if i == last + 1:
                        k0 = k1
                    else:
                        x = ((key ^ (i & m64)) + 0x9E3779B97F4A7C15) & m64
                        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m64
                        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m64
                        k0 = (x ^ (x >> 31)) * scale - sqrt3
                    x = ((key ^ ((i + 1) & m64)) + 0x9E3779B97F4A7C15) & m64
                    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m64
                    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m64
                    k1 = (x ^ (x >> 31)) * scale - sqrt3
                    a0 = amp * k0
                    ad = amp * (k1 - k0)
                    last = i
                f = (t - i * period) * inv
                v = a0 + ad * (f * f * f * (f * (f * 6.0 - 15.0) + 10.0))
                out[j] += v if reg is None else v * reg[j]
        return out

    def fine_sigma(self, below_ms: int, regime: float = 1.0) -> float:
        """Standard deviation contributed by octaves with period < below_ms."""
        var = 0.0
        for period, amp, _key, regimed in self._oct:
            if period < below_ms:
                a = amp * regime if regimed else amp
                var += a * a * 0.67
        return math.sqrt(var)


# ---------------------------------------------------------------------------------
# assets, quote currencies and exchanges
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Asset:
    usd: float  # reference USD price
    sigma: float  # idiosyncratic daily volatility
    beta: float  # loading on the market factor
    activity: float  # relative trading activity
    kind: str = "crypto"  # crypto | stable | fiat | usd


_ASSETS = {
    "BTC": _Asset(43_000.0, 0.010, 1.0, 1.0),
    "ETH": _Asset(2_300.0, 0.018, 1.15, 0.8),
    "SOL": _Asset(100.0, 0.030, 1.3, 0.6),
    "XRP": _Asset(0.6, 0.025, 1.1, 0.5),
    "ADA": _Asset(0.5, 0.025, 1.15, 0.4),
    "DOGE": _Asset(0.08, 0.035, 1.3, 0.45),
    "BNB": _Asset(310.0, 0.015, 0.9, 0.5),
    "AVAX": _Asset(35.0, 0.030, 1.3, 0.4),
    "DOT": _Asset(7.0, 0.028, 1.2, 0.35),
    "LINK": _Asset(15.0, 0.028, 1.2, 0.4),
    "LTC": _Asset(70.0, 0.022, 1.0, 0.35),
    "MATIC": _Asset(0.85, 0.030, 1.25, 0.35),
    "TRX": _Asset(0.11, 0.015, 0.7, 0.3),
    "SHIB": _Asset(0.00001, 0.035, 1.3, 0.35),
    "TON": _Asset(2.3, 0.03, 1.0, 0.3),
    "USDT": _Asset(1.0, 0.0002, 0.0, 0.5, "stable"),
    "USDC": _Asset(1.0, 0.0002, 0.0, 0.4, "stable"),
    "DAI": _Asset(1.0, 0.0004, 0.0, 0.2, "stable"),
    "FDUSD": _Asset(1.0, 0.0003, 0.0, 0.3, "stable"),
    "BUSD": _Asset(1.0, 0.0002, 0.0, 0.3, "stable"),
    "TUSD": _Asset(1.0, 0.0004, 0.0, 0.2, "stable"),
    "USD": _Asset(1.0, 0.0, 0.0, 0.6, "usd"),
    "EUR": _Asset(1.08, 0.004, 0.0, 0.3, "fiat"),
    "GBP": _Asset(1.27, 0.004, 0.0, 0.25, "fiat"),
}
_USD_TICKS = {"BTC": 0.01, "ETH": 0.01, "SOL": 0.001, "XRP": 0.0001, "ADA": 0.0001, "DOGE": 0.00001,
              "BNB": 0.01, "AVAX": 0.001, "DOT": 0.001, "LINK": 0.001, "LTC": 0.01, "MATIC": 0.0001,
              "TRX": 0.00001, "SHIB": 0.00000001, "TON": 0.0001}
_QUOTE_ACTIVITY = {"USDT": 1.0, "USD": 0.8, "USDC": 0.6, "FDUSD": 0.5, "BUSD": 0.4, "EUR": 0.35,
                   "GBP": 0.25, "BTC": 0.45, "ETH": 0.3, "DAI": 0.2, "TUSD": 0.2}
_EXCHANGE_ACTIVITY = {"binance": 1.0, "okx": 0.8, "bybit": 0.75, "coinbase": 0.7, "kraken": 0.5,
                      "bitstamp": 0.4, "kucoin": 0.5, "gate": 0.4, "bitfinex": 0.4, "simulator": 1.0}
_MARKET_SIGMA = 0.025  # daily volatility of the common crypto factor
_BOOK_SPAN = 0.015  # levels are kept within 1.5 % of mid


def _asset(symbol: str) -> _Asset:
    found = _ASSETS.get(symbol)
    if found is not None:
        return found
    h = stable_hash("asset", symbol)
    usd = 10 ** (-3 + 6 * ((h & 0xFFFFFFFF) / 2**32))
    return _Asset(usd, 0.04, 1.2, 0.3)


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _nice_floor(x: float) -> int:
    """Largest of 1, 2, 5, 10, 20, 50, ... not above x (at least 1)."""
    if x < 2:
        return 1
    e = 10 ** int(math.floor(math.log10(x)))
    for m in (5, 2, 1):
        if m * e <= x:
            return m * e
    return e
