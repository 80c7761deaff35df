"""A deterministic market simulator: the offline source of events and labelled spoofing
episodes. Plain Python, no Django.

Determinism. Everything is a pure function of (seed, pair, time):

* The fair mid is a sum of value-noise octaves on log price (periods 20 s .. 243 days,
  amplitudes scaled like a random walk, the short ones multiplied by a slowly varying
  volatility regime), evaluated at any t without iterating from an origin. An asset's
  USD log price is beta * market factor + its own path, so pairs of one asset on
  several exchanges / quote currencies agree (ETH-BTC = ETH-USD / BTC-USD), plus a small
  exchange-specific basis.
* Events are generated in 1-minute blocks. A block is seeded by blake2b(seed, exchange,
  base, quote, minute) and starts with a BookSnapshot at the minute start (a resync: the
  book drawn fresh around the fair mid, so detectors must treat a snapshot as a reset,
  not as cancels), then BookDeltas, Trades and Quotes inside the minute. `events(pair, a,
  c)` filters the blocks to the window, so [a, c) == [a, b) + [b, c) for any b.
* Episodes (labels) are drawn per minute from their own hash, so `episodes_between`
  needs no event generation. Episodes stay inside their minute, except the hard negative
  "patient_far" (a far order resting for minutes), which later blocks know about.

Flow inside a minute: Poisson limit-order arrivals (biased to the touch, on a price grid
that is one tick wide near the touch and coarser away from it, ~20-50 levels a side
within 1.5 % of mid), cancels, market orders walking the book (one Trade per level
touched, taker side), and "informed" flow: when the fair price moves through resting
orders they are mostly cancelled, partly taken. Traders react to the top-10 imbalance
(market-order side probability) and signed flow and imbalance move an impact term that
shifts the reference price, so pressure moves price a little; the impact fades out
before the minute ends so blocks stay independent. Activity follows a daily cycle
(busiest 13:00-21:00 UTC), weekends are quieter.

`synthesize_bars` produces hour/day/minute Bars from the same mid path without
generating events (for seeding long histories).
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from market.bars import DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, Bar, merge
from market.sources.events import BookDelta, BookSnapshot, Event, PairRef, Quote, Trade
from market.sources.order_book import level_set

SCHEMES = ("layering", "flipping", "vacuuming")
HARD_NEGATIVES = ("filled_wall", "quote_refresh", "iceberg", "patient_far", "two_sided_pull", "sweep")
# direction of the price move each scheme pushes toward, by the side of the fake liquidity
_DIRECTION = {
    ("layering", "bid"): "up", ("layering", "ask"): "down",
    ("flipping", "bid"): "up", ("flipping", "ask"): "down",
    ("vacuuming", "bid"): "down", ("vacuuming", "ask"): "up",
}
NEAR_MISS_SHARE = 0.25  # of random spoofing episodes: one threshold broken on purpose
# the one parameter a near miss breaks, by scheme (see _draw_episode)
_NEAR_MISSES = {
    "layering": ("layers", "size_ratio", "build_ms", "collapse_ms", "cancel_fraction"),
    "flipping": ("size_ratio", "life_ms", "cancel_fraction", "flip_latency_ms", "flip_ratio"),
    "vacuuming": ("depth_multiplier", "rest_ms", "pull_ms", "pull_fraction"),
}
_MAX_SPAN_MIN = 11  # episodes end at most this many minutes after the minute they start in


@dataclass
class Episode:
    """A labelled episode. scheme is one of SCHEMES for a spoofing episode, None for a
    hard negative (then `kind` names it). side: where the (fake) liquidity stood, "bid",
    "ask" or "both" (two-sided negatives). direction: "up"/"down" as DETECTION.md reads
    it, None for negatives. Times in epoch ms: start (first add), collapse_start (first
    pull / fill / refresh), end (last action of the episode)."""

    scheme: str | None
    side: str
    direction: str | None
    start_ms: int
    collapse_start_ms: int
    end_ms: int
    parameters: dict = field(default_factory=dict)
    kind: str = ""
    pair: PairRef | None = None

    def __post_init__(self):
        if self.scheme is not None:
            if self.scheme not in SCHEMES:
                raise ValueError(f"unknown scheme {self.scheme!r}")
            self.kind = self.scheme
        if self.side not in ("bid", "ask", "both") or (self.scheme is not None and self.side == "both"):
            raise ValueError(f"side must be 'bid' or 'ask' ('both' for two-sided negatives), got {self.side!r}")
        if self.scheme is None and self.kind not in HARD_NEGATIVES:
            raise ValueError(f"unknown hard negative kind {self.kind!r}")
        if self.direction is None and self.scheme is not None:
            self.direction = _DIRECTION[(self.scheme, self.side)]
        if not self.start_ms <= self.collapse_start_ms <= self.end_ms:
            raise ValueError("need start_ms <= collapse_start_ms <= end_ms")

    @property
    def is_spoof(self) -> bool:
        return self.scheme is not None


# ---------------------------------------------------------------------------------
# hashing and value noise
# ---------------------------------------------------------------------------------
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
# assets and pair profiles
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


@dataclass
class _Profile:
    pair: PairRef
    key: str
    p0: float
    usd_quote: float
    tick: float
    pdec: int
    lot: float
    qdec: int
    liquidity: float  # pair activity 0.15..1.2
    rate_scale: float
    sigma_daily: float
    c: float  # grid width: spacing at distance d from the reference is nice_floor((d - hs) / c) ticks
    hs: float  # half spread, ticks
    n_levels: int
    level_usd: float  # median notional of a mid-book level
    trade_usd: float  # median market order notional
    tick_scale: float  # >= 1: how many ticks make a "tick" of the thresholds on fast, fine-tick pairs
    grid: list  # distances (ticks) of the grid positions from the reference price, best first


def _grid_count(c: float, hs: float, d_max: float) -> int:
    """Price-grid positions on one side within d_max ticks of the reference price (the
    same walk as the snapshot: one tick apart near the touch, coarser further out)."""
    r = hs + 0.5
    tk = math.floor(r - hs)
    n = 0
    while r - tk <= d_max:
        n += 1
        s = _nice_floor(max(1.0, (r - tk - hs) / c))
        tk = ((tk - 1) // s) * s
    return n


_OCCUPANCY = 0.85  # share of grid positions holding a level in a fresh book


def _solve_c(span_ticks: float, hs: float, n_levels: int) -> float:
    """The width c of the grid that gives about n_levels levels within span_ticks."""
    target = n_levels / _OCCUPANCY
    if _grid_count(span_ticks + 1.0, hs, span_ticks) <= target:
        return max(1.0, span_ticks)
    lo, hi = 0.05, max(1.0, span_ticks)
    for _ in range(50):
        c = math.sqrt(lo * hi)
        if _grid_count(c, hs, span_ticks) > target:
            hi = c
        else:
            lo = c
    return max(0.05, lo)


# base rates per second for a pair of liquidity 1 at activity 1
_RATE_ADD = 9.0
_RATE_CANCEL = 5.6
_RATE_MO = 2.2


# ---------------------------------------------------------------------------------
# the source
# ---------------------------------------------------------------------------------
class SimulatorSource:
    """Deterministic simulated market (see the module docstring).

    seed: the world; episodes_per_hour: rate of random spoofing episodes per pair (at most
    one episode starts per minute); episodes: explicit Episode list (pair None = every
    pair); hard_negatives: True for the same rate as episodes_per_hour (6 an hour if that
    is 0), or a float rate per hour."""

    name = "simulator"

    def __init__(self, seed: int = 0, episodes_per_hour: float = 0.0, *, episodes: Iterable[Episode] | None = None,
                 hard_negatives: bool | float = False, cache_blocks: int = 8) -> None:
        self.seed = seed
        self.episodes_per_hour = float(episodes_per_hour)
        if hard_negatives is True:
            self.negatives_per_hour = self.episodes_per_hour or 6.0
        elif hard_negatives is False or hard_negatives is None:
            self.negatives_per_hour = 0.0
        else:
            self.negatives_per_hour = float(hard_negatives)
        self._explicit: list[Episode] = []
        for ep in episodes or ():
            first, last = ep.start_ms // MINUTE_MS, ep.end_ms // MINUTE_MS
            if last != first and ep.kind != "patient_far":
                raise ValueError(f"episode {ep.kind} must stay inside one minute: {ep.start_ms}..{ep.end_ms}")
            if last - first >= _MAX_SPAN_MIN:
                raise ValueError("episode spans too many minutes")
            self._explicit.append(ep)
        self._cache_size = cache_blocks
        self._lock = threading.RLock()  # the caches may be shared by threads
        self._blocks: OrderedDict = OrderedDict()
        self._profiles: dict = {}
        self._paths: dict = {}
        self._vcache: dict = {}
        self._market = _Octaves(stable_hash("market", seed), _MARKET_SIGMA)
        self._regime = _Octaves(stable_hash("regime", seed), 1.0, periods_ms=(8 * HOUR_MS, 3 * DAY_MS), regime_max_ms=0)
        self._activity_noise = _Octaves(stable_hash("activity", seed), 1.0, periods_ms=(2 * HOUR_MS, 9 * HOUR_MS), regime_max_ms=0)

    # -- Source protocol -------------------------------------------------------------
    def earliest_ms(self, pair: PairRef) -> int | None:
        return None

    def events(self, pair: PairRef, start_ms: int, end_ms: int) -> Iterator[Event]:
        if end_ms <= start_ms:
            return
        prof = self._profile(pair)
        first = start_ms // MINUTE_MS
        last = (end_ms - 1) // MINUTE_MS
        for m in range(first, last + 1):
            block = self._block(prof, m)
            t0 = m * MINUTE_MS
            if start_ms <= t0 and end_ms >= t0 + MINUTE_MS:
                yield from block
            else:
                for ev in block:
                    ts = ev.ts_ms
                    if ts >= end_ms:
                        break
                    if ts >= start_ms:
                        yield ev

    # -- paths -------------------------------------------------------------------------
    def _asset_path(self, symbol: str) -> tuple[_Asset, _Octaves | None]:
        found = self._paths.get(symbol)
        if found is None:
            a = _asset(symbol)
            if a.kind == "usd":
                path = None
            elif a.kind == "stable":
                path = _Octaves(stable_hash("asset", self.seed, symbol), a.sigma, max_period_ms=DAY_MS)
            else:
                path = _Octaves(stable_hash("asset", self.seed, symbol), a.sigma)
            found = self._paths[symbol] = (a, path)
        return found

    def regime(self, t: int) -> float:
        """Volatility regime factor (about 0.5 .. 2), slowly varying."""
        return self._regimes([t])[0]

    def _cached(self, name, ts: list, min_period_ms: int, compute) -> list:
        with self._lock:
            cache = self._vcache.get((name, min_period_ms))
            if cache is None:
                cache = self._vcache[(name, min_period_ms)] = {}
            missing = [t for t in ts if t not in cache]
            if missing:
                if len(cache) + len(missing) > 250_000:  # bounded memory: start over
                    cache.clear()
                    missing = list(dict.fromkeys(ts))
                cache.update(zip(missing, compute(missing)))
            return [cache[t] for t in ts]

    def _regimes(self, ts: list) -> list:
        return self._cached("*regime", ts, 0, lambda m: [math.exp(0.35 * v) for v in self._regime.values(m)])

    def _xs(self, symbol: str, ts: list, min_period_ms: int = 0) -> list:
        """Log USD price of an asset relative to its reference price, at many times."""
        a, path = self._asset_path(symbol)
        if path is None:
            return [0.0] * len(ts)

        def compute(missing):
            regs = self._regimes(missing)
            vals = path.values(missing, regs, min_period_ms)
            if a.beta:
                market = self._cached("*market", missing, min_period_ms,
                                      lambda mm: self._market.values(mm, self._regimes(mm), min_period_ms))
                vals = [v + a.beta * mv for v, mv in zip(vals, market)]
            return vals

        return self._cached(symbol, ts, min_period_ms, compute)

    def mid_price(self, pair: PairRef, t: int) -> float:
        """The fair mid of the pair at time t (ms): a pure function of (seed, pair, t)."""
        return self._mids(self._profile(pair), [t])[0]

    def _mid(self, prof: _Profile, t: int, min_period_ms: int = 0) -> float:
        return self._mids(prof, [t], min_period_ms)[0]

    def _mids(self, prof: _Profile, ts: list, min_period_ms: int = 0) -> list:
        p = prof.pair
        xb = self._xs(p.base, ts, min_period_ms)
        xq = self._xs(p.quote, ts, min_period_ms)
        basis = self._paths.get(("basis", prof.key))
        if basis is None:
            basis = self._paths[("basis", prof.key)] = _Octaves(
                stable_hash("basis", self.seed, prof.key), 0.004, periods_ms=(80_000, 1_280_000, 20_480_000),
                regime_max_ms=0)
        xe = basis.values(ts, None, min_period_ms)
        p0 = prof.p0
        exp = math.exp
        return [p0 * exp(b - q + e) for b, q, e in zip(xb, xq, xe)]

    def activity(self, pair: PairRef, t: int) -> float:
        """Relative activity at t (mean about 1): daily cycle, weekend, slow noise, regime."""
        return self._activity(t)

    def _activity(self, t: int) -> float:
        return self._activities([t])[0]

    def _activities(self, ts: list) -> list:
        slow = self._activity_noise.values(ts)
        regs = self._regimes(ts)
        out = []
        for t, sl, reg in zip(ts, slow, regs):
            h = (t % DAY_MS) / HOUR_MS
            cyc = (0.5 + 1.1 * math.exp(-(((h - 17.0) / 4.0) ** 2)) + 0.25 * math.exp(-(((h - 3.0) / 3.0) ** 2))
                   + 1.1 * math.exp(-(((h + 7.0) / 4.0) ** 2)) + 0.25 * math.exp(-(((h - 27.0) / 3.0) ** 2))) / _CYCLE_MEAN
            weekday = (t // DAY_MS + 3) % 7  # 1970-01-01 was a Thursday; 5, 6 = Sat, Sun
            week = 0.72 if weekday >= 5 else 1.08
            out.append(cyc * week * math.exp(0.6 * sl) * math.sqrt(reg))
        return out

    # -- profiles --------------------------------------------------------------------
    def _profile(self, pair: PairRef) -> _Profile:
        prof = self._profiles.get(pair)
        if prof is not None:
            return prof
        exchange, base, quote = pair.exchange.lower(), pair.base.upper(), pair.quote.upper()
        norm = PairRef(exchange, base, quote)
        ab, aq = _asset(base), _asset(quote)
        p0 = ab.usd / aq.usd
        if base in _USD_TICKS and aq.kind in ("usd", "stable", "fiat"):
            tick = _USD_TICKS[base]
        else:
            tick = 10.0 ** (math.floor(math.log10(p0)) - 4)
        ex_act = _EXCHANGE_ACTIVITY.get(exchange)
        if ex_act is None:
            ex_act = 0.4 + 0.5 * ((stable_hash("exchange", exchange) & 0xFFFF) / 65536)
        q_act = _QUOTE_ACTIVITY.get(quote, 0.3)
        liquidity = min(1.2, max(0.15, ab.activity * q_act * ex_act))
        trade_usd = 2500.0 * liquidity
        lot = 10.0 ** (math.floor(math.log10(trade_usd / ab.usd)) - 3)
        sig_b = math.hypot(ab.sigma, ab.beta * _MARKET_SIGMA) if ab.kind == "crypto" else ab.sigma
        sig_q = math.hypot(aq.sigma, aq.beta * _MARKET_SIGMA) if aq.kind == "crypto" else aq.sigma
        sigma = max(1e-4, math.sqrt(max(0.0, sig_b**2 + sig_q**2 - 2 * ab.beta * aq.beta * _MARKET_SIGMA**2)))
        n_levels = int(round(24 + 20 * min(1.0, liquidity)))
        span_ticks = _BOOK_SPAN * p0 / tick
        key = f"{exchange}|{base}|{quote}"
        hs = 0.5 + 2.0 * (1 - min(1.0, liquidity)) * (stable_hash("spread", key) & 0xFF) / 255
        c = _solve_c(span_ticks, hs, n_levels)
        grid = _grid_distances(c, hs, span_ticks * 1.1)
        depth_usd = 6.0e6 * liquidity**1.5  # per side within 1 %
        in_band = max(3.0, _OCCUPANCY * _grid_count(c, hs, 0.01 * p0 / tick))
        level_usd = depth_usd / in_band / 1.1
        # the fair price moves ~0.3 sigma_1s a second at 1 s resolution: on pairs where that is
        # many ticks (BTC: ~100) spoof distances are drawn in multiples of a quarter of it
        tick_scale = max(1.0, 0.3 * sigma / math.sqrt(86_400) * p0 / tick / 4)
        prof = _Profile(norm, key, p0, aq.usd, tick, _decimals(tick), lot, _decimals(lot), liquidity,
                        0.3 + 0.7 * min(1.0, liquidity), sigma, c, hs, n_levels, level_usd, trade_usd, tick_scale,
                        grid)
        self._profiles[pair] = prof
        self._profiles[norm] = prof
        return prof

    def tick_size(self, pair: PairRef) -> float:
        return self._profile(pair).tick

    # -- blocks ----------------------------------------------------------------------
    def _block(self, prof: _Profile, m: int) -> list:
        key = (prof.key, m)
        with self._lock:
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
                return block
        t0 = m * MINUTE_MS
        active = [ep for mm in range(m - _MAX_SPAN_MIN, m + 1) for ep in self._episodes_starting(prof, mm)
                  if ep.end_ms >= t0 and ep.start_ms < t0 + MINUTE_MS]
        rng = random.Random(stable_hash("block", self.seed, prof.key, m))
        block = _Block(self, prof, m, rng, active).run()
        with self._lock:
            self._blocks[key] = block
            while len(self._blocks) > self._cache_size:
                self._blocks.popitem(last=False)
        return block

    # -- episodes --------------------------------------------------------------------
    def episodes_between(self, pair: PairRef, start_ms: int, end_ms: int) -> list[Episode]:
        """Labelled episodes (spoofing and hard negatives) overlapping [start_ms, end_ms)."""
        prof = self._profile(pair)
        out = []
        for m in range(start_ms // MINUTE_MS - _MAX_SPAN_MIN, (end_ms - 1) // MINUTE_MS + 1):
            for ep in self._episodes_starting(prof, m):
                if ep.end_ms >= start_ms and ep.start_ms < end_ms:
                    out.append(ep)
        out.sort(key=lambda e: (e.start_ms, e.kind))
        return out

    def _explicit_for(self, prof: _Profile) -> list[Episode]:
        cached = self._paths.get(("explicit", prof.key))
        if cached is None:
            cached = []
            for ep in self._explicit:
                if ep.pair is None or (ep.pair.exchange.lower(), ep.pair.base.upper(), ep.pair.quote.upper()) == (
                        prof.pair.exchange, prof.pair.base, prof.pair.quote):
                    cached.append(ep)
            self._paths[("explicit", prof.key)] = cached
        return cached

    def _episodes_starting(self, prof: _Profile, m: int) -> list[Episode]:
        explicit = self._explicit_for(prof)
        out = []
        taken = False
        t0 = m * MINUTE_MS
        for ep in explicit:
            if ep.start_ms // MINUTE_MS == m:
                out.append(_with_defaults(ep, prof, self))
            if ep.start_ms // MINUTE_MS <= m <= ep.end_ms // MINUTE_MS and ep.kind != "patient_far":
                taken = True
        p_pos = min(1.0, self.episodes_per_hour / 60.0)
        p_neg = min(1.0 - p_pos, self.negatives_per_hour / 60.0)
        if taken or (p_pos <= 0 and p_neg <= 0):
            return out
        rng = random.Random(stable_hash("episode", self.seed, prof.key, m))
        u = rng.random()
        if u < p_pos:
            kind = SCHEMES[rng.randrange(3)]
        elif u < p_pos + p_neg:
            kind = HARD_NEGATIVES[rng.randrange(len(HARD_NEGATIVES))]
        else:
            return out
        out.append(_draw_episode(kind, rng, prof, t0, self))
        return out

    # -- long histories without events ------------------------------------------------
    def synthesize_bars(self, pair: PairRef, start_ms: int, end_ms: int, granularity: str = "hour") -> list[Bar]:
        """Bars for every period of `granularity` ("minute", "hour" or "day") starting in
        [floor(start_ms), end_ms), drawn from the same mid path as the events but without
        generating them (a year of hourly bars takes well under a second a pair).

        Each bar is a pure function of (seed, pair, granularity, period start), so any split
        of the range gives the same bars; a day bar is the merge of its 24 hour bars. open
        and close are the fair mid at the bar's start and end plus half a spread, high/low
        the extremes of the path sampled inside the bar widened by the unsampled part of
        the path and by the trade-price noise around the mid. Rates, sizes, depth, levels
        and spreads are calibrated once per pair on a few generated minutes, so they match
        what event-built bars of the same pair hold on average."""
        prof = self._profile(pair)
        if granularity == "day":
            first = start_ms - start_ms % DAY_MS
            hours = self.synthesize_bars(pair, first, max(end_ms, first + 1) + (-max(end_ms, first + 1)) % DAY_MS, "hour")
            return [merge(hours[i:i + 24], hours[i].ts_ms) for i in range(0, len(hours), 24)]
        if granularity == "hour":
            step, n_sub, min_period = HOUR_MS, 3, 20 * MINUTE_MS
        elif granularity == "minute":
            step, n_sub, min_period = MINUTE_MS, 6, 0
        else:
            raise ValueError("granularity must be minute, hour or day")
        first = start_ms - start_ms % step
        n = max(0, -((first - end_ms) // step))
        if n == 0:
            return []
        cal = self._calibration(prof)
        bounds = [first + i * step for i in range(n + 1)]
        edge = self._mids(prof, bounds)
        inner_ts = [t + step * j // n_sub for t in bounds[:-1] for j in range(1, n_sub)]
        inner = self._mids(prof, inner_ts, min_period)
        regs = self._regimes(bounds[:-1])
        acts = self._activities([t + step // 2 for t in bounds[:-1]])
        fine = self._fine_sigma(prof, step // n_sub)
        key = stable_hash("synth", self.seed, prof.key, step)
        k = n_sub - 1
        out = []
        for i in range(n):
            pts = [edge[i], *inner[i * k:(i + 1) * k], edge[i + 1]]
            out.append(_synth_bar(self, prof, cal, bounds[i], step, pts, fine * regs[i], acts[i], key))
        return out

    def _fine_sigma(self, prof: _Profile, below_ms: int) -> float:
        """Std of the part of the pair's log path made of octaves shorter than below_ms."""
        found = self._paths.get(("fine", prof.key, below_ms))
        if found is not None:
            return found
        ab, _pb = self._asset_path(prof.pair.base)
        aq, _pq = self._asset_path(prof.pair.quote)
        var = 0.0
        for a, (asset, path) in ((ab, self._asset_path(prof.pair.base)), (aq, self._asset_path(prof.pair.quote))):
            if path is not None:
                var += path.fine_sigma(below_ms) ** 2
        beta = ab.beta - aq.beta
        var += (beta * self._market.fine_sigma(below_ms)) ** 2
        found = self._paths[("fine", prof.key, below_ms)] = math.sqrt(var)
        return found

    def _calibration(self, prof: _Profile) -> dict:
        """What the event model does on average for this pair, measured on a few generated
        minutes (without episodes), per unit of the profile's sizes and rates."""
        found = self._paths.get(("calibration", prof.key))
        if found is not None:
            return found
        from market.sources.bar_builder import build_bars  # local: keeps the import graph flat

        acc: dict = {}
        n = 0
        ref = 19_723 * 1440  # 2024-01-01, minutes
        for j in range(4):
            m = ref + j * 367 + 13 * 60  # spread over hours of the day, in the busy part too
            rng = random.Random(stable_hash("calibration", self.seed, prof.key, j))
            blk = _Block(self, prof, m, rng, [])
            events = blk.run()
            t0 = m * MINUTE_MS
            bar = build_bars(events, prof.pair, t0, t0 + MINUTE_MS, interval_ms=MINUTE_MS)[0]
            rate = prof.rate_scale * blk.act
            lot = prof.lot
            tick = prof.tick
            mid = blk.fair[30] * tick
            vals = {
                "trades": bar.trade_count / 60.0 / rate,
                "qty": (bar.volume / bar.trade_count / (blk.trade_lots * lot)) if bar.trade_count else 1.0,
                "buy_share": bar.buy_volume / bar.volume if bar.volume else 0.5,
                "depth": ((bar.bid_depth or 0.0) + (bar.ask_depth or 0.0)) / 2 / (blk.level_lots * lot),
                "orders": (bar.bid_orders_sum + bar.ask_orders_sum) / 2 / max(1, bar.book_samples),
                "quotes": bar.quote_count / 60.0 / rate,
                "spread_mean": (bar.spread_bps_sum / bar.quote_count) * mid / 1e4 / tick if bar.quote_count else 1.0,
                "spread_min": (bar.spread_bps_min or 0.0) * mid / 1e4 / tick,
                "spread_max": (bar.spread_bps_max or 0.0) * mid / 1e4 / tick,
            }
            # trade prices around the fair path: how far the range reaches past the path's
            # extremes, and the variance they add (both relative to the price)
            path = [x * tick for x in blk.fair]
            if bar.trade_count > 1:
                path_mean = sum(path) / len(path)
                path_var = sum((x - path_mean) ** 2 for x in path) / len(path)
                vals["ext"] = max(0.0, (bar.high / max(path) - 1.0 + 1.0 - bar.low / min(path)) / 2)
                vals["var_excess"] = max(0.0, (bar.price_variance - path_var) / (path_mean * path_mean))
            else:
                vals["ext"] = vals["var_excess"] = 0.0
            vals["top10"] = _median_top10_lots(events, prof.pair, lot) / blk.level_lots
            for key, v in vals.items():
                acc[key] = acc.get(key, 0.0) + v
            n += 1
        cal = {key: v / n for key, v in acc.items()}
        cal["spread_min"] = max(1.0, round(cal["spread_min"]))
        cal["buy_share"] = min(0.55, max(0.45, cal["buy_share"]))
        self._paths[("calibration", prof.key)] = cal
        return cal


def _median_top10_lots(events: list, pair: PairRef, lot: float) -> float:
    """Median top-10 depth of a side, in lots, sampled every second of a block's events
    (both sides): the side's usual depth, as a rolling baseline of the book would see it."""
    from market.sources.bar_builder import BarBuilder  # local: keeps the import graph flat

    replay = BarBuilder(pair)
    samples = []
    next_ms = None
    for ev in events:
        replay.feed(ev)
        if not isinstance(ev, (BookSnapshot, BookDelta)):
            continue
        if next_ms is None:
            next_ms = ev.ts_ms
        if ev.ts_ms >= next_ms:
            next_ms += SECOND_MS
            for levels in replay.book():
                samples.append(sum(q for _p, q in levels[:10]) / lot)
    samples.sort()
    return samples[len(samples) // 2] if samples else 0.0


def _grid_distances(c: float, hs: float, d_max: float) -> list:
    """Distances (ticks from the reference price) of the grid positions on one side, best
    first: the walk _grid_count and the snapshot make."""
    r = hs + 0.5
    tk = math.floor(r - hs)
    out = []
    while r - tk <= d_max:
        out.append(r - tk)
        s = _nice_floor(max(1.0, (r - tk - hs) / c))
        tk = ((tk - 1) // s) * s
    return out or [hs]


def _grid_index(d: float, grid: list) -> float:
    """The (continuous) position index of distance d ticks on a grid of distances."""
    i = bisect_left(grid, d)
    if i == 0:
        return 0.0
    if i >= len(grid):
        return float(len(grid) - 1) + (d - grid[-1]) / max(1.0, grid[-1] - grid[-2] if len(grid) > 1 else 1.0)
    lo, hi = grid[i - 1], grid[i]
    return i - 1 + (d - lo) / (hi - lo)


def _grid_distance(k: float, grid: list) -> float:
    """Distance of the (continuous) position index k: inverse of _grid_index."""
    if k <= 0:
        return grid[0]
    i = int(k)
    if i >= len(grid) - 1:
        return grid[-1]
    return grid[i] + (grid[i + 1] - grid[i]) * (k - i)


def _level_shape(k: float) -> float:
    """Median level size by grid index, relative to a mid-book level."""
    return (0.35 + 0.65 * (1.0 - math.exp(-k / 6.0))) * (1.0 + k / 40.0)


def _cycle_mean() -> float:
    total = 0.0
    for i in range(24 * 60):
        h = i / 60
        total += (0.5 + 1.1 * math.exp(-(((h - 17.0) / 4.0) ** 2)) + 0.25 * math.exp(-(((h - 3.0) / 3.0) ** 2))
                  + 1.1 * math.exp(-(((h + 7.0) / 4.0) ** 2)) + 0.25 * math.exp(-(((h - 27.0) / 3.0) ** 2)))
    return total / (24 * 60)


_CYCLE_MEAN = _cycle_mean()


def _lu(rng: random.Random, lo: float, hi: float) -> float:
    """Log-uniform draw."""
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


# ---------------------------------------------------------------------------------
# one minute of events
# ---------------------------------------------------------------------------------
_IMPACT_TAU_S = 20.0  # the impact decays as exp(-t / tau), seconds
_IMPACT_IMBALANCE = 0.8  # drift of the impact, in per-second sigmas per unit of top-10 imbalance
_IMPACT_FLOW = 0.15  # kick of one typical market order, in per-second sigmas
_TAKE_STALE = 0.12  # share of orders run over by the fair price that are traded, not cancelled
_ADD_BIAS = 1.5  # adds at level index n_levels * u ** _ADD_BIAS: more near the touch
_FOLLOW = 0.12  # chance per event that a market maker re-quotes a touch left behind
_FOLLOW_MS = 500  # how often a depth episode moves orders the touch left behind back into view
_ADD_SIZE = 0.55  # median add, relative to the median level size at that distance
_INF = float("inf")


class _Order:
    """A tracked order (episodes): its level, the quantity ahead of it in the queue, what
    remains, what was filled."""

    __slots__ = ("is_bid", "tick", "ahead", "rem", "orig", "filled")

    def __init__(self, is_bid: bool, tick: int, ahead: int, lots: int) -> None:
        self.is_bid, self.tick, self.ahead, self.rem, self.orig, self.filled = is_bid, tick, ahead, lots, lots, 0


class _Block:
    def __init__(self, src: SimulatorSource, prof: _Profile, m: int, rng: random.Random, episodes: list[Episode]):
        self.src, self.prof, self.m, self.rng, self.episodes = src, prof, m, rng, episodes
        self.t0 = t0 = m * MINUTE_MS
        tick = prof.tick
        self.fair = [x / tick for x in src._mids(prof, [t0 + s * SECOND_MS for s in range(61)])]
        self.act = src._activity(t0 + 30 * SECOND_MS)
        self.sig_s = prof.sigma_daily / math.sqrt(86_400) * src.regime(t0)
        usd_base = self.fair[0] * tick * prof.usd_quote
        lots_per_usd = 1.0 / (usd_base * prof.lot)
        self.level_lots = prof.level_usd * lots_per_usd
        self.trade_lots = prof.trade_usd * lots_per_usd
        self.c, self.hs, self.grid = prof.c, prof.hs, prof.grid
        self.dmax = _BOOK_SPAN * self.fair[0]
        self.bids: dict[int, int] = {}
        self.asks: dict[int, int] = {}
        self.depth_b = self.depth_a = 0  # total lots per side
        self.bk: list[int] = []  # bid ticks ascending (best last)
        self.ak: list[int] = []  # ask ticks ascending (best first)
        self.special: dict = {}  # (is_bid, tick) -> [_Order]
        self.cb: dict[int, int] = {}
        self.ca: dict[int, int] = {}
        self.out: list = []
        self.top = None
        self.impact = 0.0
        self.t = 0.0
        self.ts = t0
        self.r = self.fair[0]
        self.imb = 0.0
        self.seq = 0  # trades in the block (trade ids)
        self.seq_actions = 0  # scheduled episode actions (orders equal times)
        self._tick, self._pdec, self._lot, self._qdec = tick, prof.pdec, prof.lot, prof.qdec

    # -- conversions -------------------------------------------------------------------
    def px(self, tk: int) -> float:
        return round(tk * self._tick, self._pdec)

    def qty(self, lots: int) -> float:
        return round(lots * self._lot, self._qdec)

    def median_lots(self, d_ticks: float) -> float:
        """Median resting size at d ticks from the reference price."""
        return max(1.0, self.level_lots * _level_shape(_grid_index(d_ticks, self.grid)))

    def typical_lots(self, is_bid: bool, d_ticks: float) -> float:
        """The typical level an observer of the book sees d ticks behind the touch: the
        median size of the five visible levels of the side nearest that distance (what
        the detectors' rolling median by distance bucket measures), nominal on a thin
        book. Episode sizes are multiples of this."""
        keys, book = (self.bk, self.bids) if is_bid else (self.ak, self.asks)
        if len(keys) < 5:
            return self.median_lots(self.hs + d_ticks)
        touch = keys[-1] if is_bid else keys[0]
        near = keys[-40:] if is_bid else keys[:40]
        near = sorted(near, key=lambda tk: abs(abs(tk - touch) - d_ticks))[:5]
        sizes = sorted(book[tk] for tk in near)
        return max(1.0, float(sizes[2]))

    # -- clock -------------------------------------------------------------------------
    def clock(self, t: float) -> None:
        dt = (t - self.t) / 1000.0
        self.t = t
        self.ts = self.t0 + int(t)
        if dt > 0:
            self.impact = self.impact * math.exp(-dt / _IMPACT_TAU_S) + _IMPACT_IMBALANCE * self.imb * self.sig_s * dt
        s = int(t // 1000)
        f = t / 1000.0 - s
        fair = self.fair
        base = fair[s] + (fair[s + 1] - fair[s]) * f
        taper = min(1.0, (60_000.0 - t) / 10_000.0)
        self.r = base * math.exp(self.impact * taper)

    # -- book primitives ---------------------------------------------------------------
    def set_level(self, is_bid: bool, tk: int, lots: int) -> None:
        if is_bid:
            self.depth_b += lots - level_set(self.bids, self.bk, tk, lots)
            self.cb[tk] = lots
        else:
            self.depth_a += lots - level_set(self.asks, self.ak, tk, lots)
            self.ca[tk] = lots

    def protected(self, is_bid: bool, tk: int) -> int:
        orders = self.special.get((is_bid, tk))
        return sum(o.rem for o in orders) if orders else 0

    def best(self, is_bid: bool) -> int:
        if is_bid:
            return self.bk[-1] if self.bk else math.floor(self.r - self.hs)
        return self.ak[0] if self.ak else math.ceil(self.r + self.hs)

    def flush(self) -> None:
        cb, ca = self.cb, self.ca
        if not cb and not ca:
            return
        px, qty = self.px, self.qty
        bids = tuple((px(t), qty(q)) for t, q in sorted(cb.items(), reverse=True)) if cb else ()
        asks = tuple((px(t), qty(q)) for t, q in sorted(ca.items())) if ca else ()
        cb.clear()
        ca.clear()
        self.out.append(BookDelta(self.ts, bids, asks))
        self.quote()

    def quote(self) -> None:
        bk, ak = self.bk, self.ak
        if bk and ak:
            bt, at = bk[-1], ak[0]
            top = (bt, self.bids[bt], at, self.asks[at])
            if top != self.top:
                self.top = top
                self.out.append(Quote(self.ts, self.px(bt), self.qty(top[1]), self.px(at), self.qty(top[3])))

    # -- orders --------------------------------------------------------------------------
    def place(self, is_bid: bool, tk: int, lots: int) -> _Order:
        """A tracked limit order (never crossing the book)."""
        lots = max(1, int(lots))
        if is_bid:
            if self.ak and tk >= self.ak[0]:
                tk = self.ak[0] - 1
            level = self.bids.get(tk, 0)
        else:
            if self.bk and tk <= self.bk[-1]:
                tk = self.bk[-1] + 1
            level = self.asks.get(tk, 0)
        order = _Order(is_bid, tk, level, lots)
        self.special.setdefault((is_bid, tk), []).append(order)
        self.set_level(is_bid, tk, level + lots)
        return order

    def queue_ahead(self, order: _Order) -> int:
        """Lots a market order must take before it reaches `order`: the better levels of its
        side and the queue ahead of it at its own price."""
        if order.is_bid:
            return sum(self.bids[t] for t in self.bk if t > order.tick) + order.ahead
        return sum(self.asks[t] for t in self.ak if t < order.tick) + order.ahead

    def pull(self, order: _Order, fraction: float = 1.0) -> int:
        """Cancel a fraction of what remains of a tracked order; returns lots cancelled."""
        x = order.rem if fraction >= 1.0 else int(round(order.rem * fraction))
        book = self.bids if order.is_bid else self.asks
        level = book.get(order.tick, 0)
        x = min(x, level)
        if x <= 0:
            return 0
        order.rem -= x
        self.set_level(order.is_bid, order.tick, level - x)
        if order.rem <= 0:
            self._forget(order)
        return x

    def _forget(self, order: _Order) -> None:
        key = (order.is_bid, order.tick)
        orders = self.special.get(key)
        if orders and order in orders:
            orders.remove(order)
            if not orders:
                del self.special[key]

    def _consume(self, is_bid: bool, tk: int, x: int) -> None:
        orders = self.special.get((is_bid, tk))
        if not orders:
            return
        for o in list(orders):
            if x <= o.ahead:
                o.ahead -= x
            else:
                fill = min(o.rem, x - o.ahead)
                o.rem -= fill
                o.filled += fill
                o.ahead = 0
                if o.rem <= 0:
                    self._forget(o)

    def trade(self, tk: int, lots: int, taker_buy: bool) -> None:
        self.seq += 1
        self.out.append(Trade(self.ts, self.px(tk), self.qty(lots), "buy" if taker_buy else "sell",
                              f"{self.m}-{self.seq}"))

    def market(self, taker_buy: bool, lots: int, keep_levels: int = 3) -> int:
        """A market order walking the opposite side; returns lots executed."""
        is_bid = not taker_buy
        book, keys = (self.bids, self.bk) if is_bid else (self.asks, self.ak)
        left = int(lots)
        done = 0
        while left > 0 and len(keys) > keep_levels:
            tk = keys[-1] if is_bid else keys[0]
            level = book[tk]
            take = left if left < level else level
            self._consume(is_bid, tk, take)
            self.set_level(is_bid, tk, level - take)
            self.trade(tk, take, taker_buy)
            left -= take
            done += take
        return done

    def add_at(self, is_bid: bool, tk: int, lots: int) -> None:
        if is_bid:
            if self.ak and tk >= self.ak[0]:
                tk = self.ak[0] - 1
            self.set_level(True, tk, self.bids.get(tk, 0) + lots)
        else:
            if self.bk and tk <= self.bk[-1]:
                tk = self.bk[-1] + 1
            self.set_level(False, tk, self.asks.get(tk, 0) + lots)

    def grid_tick(self, is_bid: bool, d: float) -> int:
        s = _nice_floor(max(1.0, (d - self.hs) / self.c))
        if is_bid:
            return math.floor((self.r - d) / s) * s
        return -math.floor(-(self.r + d) / s) * s

    def top_depth(self, is_bid: bool, n: int = 10) -> int:
        if is_bid:
            return sum(self.bids[t] for t in self.bk[-n:])
        return sum(self.asks[t] for t in self.ak[:n])

    # -- background flow ---------------------------------------------------------------
    def add_random(self) -> None:
        rng = self.rng
        is_bid = rng.random() < 0.5
        k = len(self.grid) * rng.random() ** _ADD_BIAS
        d = _grid_distance(k, self.grid)
        tk = self.grid_tick(is_bid, d)
        lots = int(self.level_lots * _level_shape(k) * _ADD_SIZE * rng.lognormvariate(0.0, 0.9)) + 1
        keys = self.bk if is_bid else self.ak
        if len(keys) > self.max_levels and tk not in (self.bids if is_bid else self.asks):
            # a crowded side: join the nearest existing level instead of opening one
            i = bisect_left(keys, tk)
            if i >= len(keys) or (i > 0 and tk - keys[i - 1] < keys[i] - tk):
                i -= 1
            tk = keys[i]
        self.add_at(is_bid, tk, lots)

    def cancel_random(self) -> None:
        """Cancel on a level chosen in proportion to its size (every resting lot has the
        same hazard), the whole level or a part of it."""
        rng = self.rng
        is_bid = rng.random() < 0.5
        keys = self.bk if is_bid else self.ak
        if not keys:
            return
        book = self.bids if is_bid else self.asks
        target = rng.random() * (self.depth_b if is_bid else self.depth_a)
        acc = 0
        tk = keys[0]
        for tk in keys:
            acc += book[tk]
            if acc > target:
                break
        level = book[tk]
        prot = self.protected(is_bid, tk) if self.special else 0
        removable = level - prot
        if removable <= 0:
            return
        # one order of a typical size there, more when the side is deeper than it started
        k = _grid_index(abs(tk - self.r), self.grid)
        size = self.level_lots * _level_shape(k) * _ADD_SIZE * rng.lognormvariate(0.0, 0.9)
        excess = (self.depth_b if is_bid else self.depth_a) / self.depth0
        x = min(removable, int(size * excess * excess * excess) + 1)
        if removable - x < 0.35 * self.level_lots * _level_shape(k):
            x = removable  # the last orders there go together
        self.set_level(is_bid, tk, level - x)
        if prot:
            for o in self.special.get((is_bid, tk), ()):
                o.ahead = min(o.ahead, level - x - prot)

    def market_random(self) -> None:
        rng = self.rng
        p_buy = min(0.9, max(0.1, 0.5 + 0.4 * self.imb))
        buy = rng.random() < p_buy
        size = min(25.0, rng.lognormvariate(0.0, 1.1))
        lots = max(1, int(self.trade_lots * size))
        self.market(buy, lots)
        self.impact += (_IMPACT_FLOW if buy else -_IMPACT_FLOW) * self.sig_s * math.sqrt(size)

    def cross(self) -> None:
        """Orders the fair price has run over: mostly cancelled, some traded. Tracked
        (episode) orders are not cancelled by this: they stay as a wall the price has to
        wait behind until their owner pulls them (or flow eats them). Then market makers
        re-quote a touch that the price left behind."""
        r = self.r
        rng = self.rng
        ak = self.ak
        i = 0
        while i < len(ak) - 1 and ak[i] < r:
            if self._run_over(False, ak[i], rng):
                i += 1
        bk = self.bk
        j = len(bk) - 1
        while j > 0 and bk[j] > r:
            if self._run_over(True, bk[j], rng):
                j -= 1
            else:
                j = min(j - 1, len(bk) - 1)
        hs = self.hs
        gap = hs + max(3.0, 2.0 * self.c)
        if bk and bk[-1] < r - gap and rng.random() < _FOLLOW:
            self.add_at(True, math.floor(r - hs), int(self.median_lots(hs) * rng.lognormvariate(0, 0.7)) + 1)
        if ak and ak[0] > r + gap and rng.random() < _FOLLOW:
            self.add_at(False, math.ceil(r + hs), int(self.median_lots(hs) * rng.lognormvariate(0, 0.7)) + 1)

    def _run_over(self, is_bid: bool, tk: int, rng: random.Random) -> int:
        """Settle a stale level: the background orders there are mostly cancelled, some
        traded; tracked orders stay (only market orders eat into them). Returns the
        tracked quantity left resting there."""
        book = self.bids if is_bid else self.asks
        level = book[tk]
        prot = self.protected(is_bid, tk) if self.special else 0
        background = level - prot
        if background <= 0:
            return prot
        if rng.random() < _TAKE_STALE:
            taken = max(1, int(background * rng.uniform(0.1, 0.7)))
            self.trade(tk, taken, not is_bid)
        self.set_level(is_bid, tk, prot)
        if prot:
            for o in self.special.get((is_bid, tk), ()):
                o.ahead = 0
        return prot

    def housekeeping(self) -> None:
        bk, ak = self.bk, self.ak
        b = sum(self.bids[t] for t in bk[-10:])
        a = sum(self.asks[t] for t in ak[:10])
        self.imb = (b - a) / (b + a) if a + b else 0.0
        lo = self.r - self.dmax * 1.1
        while bk and bk[0] < lo:
            tk = bk[0]
            prot = self.protected(True, tk) if self.special else 0
            if prot >= self.bids[tk]:
                break
            self.set_level(True, tk, prot)
            if prot:
                break
        hi = self.r + self.dmax * 1.1
        while ak and ak[-1] > hi:
            tk = ak[-1]
            prot = self.protected(False, tk) if self.special else 0
            if prot >= self.asks[tk]:
                break
            self.set_level(False, tk, prot)
            if prot:
                break

    def draw_book(self) -> None:
        rng = self.rng
        r, c, hs, dmax = self.r, self.c, self.hs, self.dmax
        for is_bid in (True, False):
            tk = math.floor(r - hs) if is_bid else math.ceil(r + hs)
            while True:
                d = abs(tk - r)
                if d > dmax:
                    break
                k = _grid_index(d, self.grid)
                if rng.random() < (0.9 if k < c else 0.8):
                    lots = int(self.level_lots * _level_shape(k) * rng.lognormvariate(0.0, 0.8)) + 1
                    self.set_level(is_bid, tk, lots)
                s = _nice_floor(max(1.0, (d - hs) / c))
                tk = ((tk - 1) // s) * s if is_bid else -((-(tk + 1)) // s) * s

    # -- the minute ------------------------------------------------------------------------
    def run(self) -> list:
        rng = self.rng
        t0 = self.t0
        self.draw_book()
        actions: list = []
        for ep in self.episodes:
            actions.extend(_episode_actions(self, ep))
        actions.sort(key=lambda a: (a[0], a[1]))
        self.cb.clear()
        self.ca.clear()
        self.depth0 = max(1, (self.depth_b + self.depth_a) // 2)
        self.max_levels = int(1.1 * (len(self.bk) + len(self.ak)) / 2) + 2
        px, qty = self.px, self.qty
        self.out.append(BookSnapshot(
            t0,
            tuple((px(t), qty(self.bids[t])) for t in reversed(self.bk)),
            tuple((px(t), qty(self.asks[t])) for t in self.ak),
        ))
        self.quote()
        self.housekeeping()
        self.flush()
        scale = self.prof.rate_scale * self.act / 1000.0
        ra, rc, rm = _RATE_ADD * scale, _RATE_CANCEL * scale, _RATE_MO * scale
        rate = ra + rc + rm
        rac = ra + rc
        t = 0.0
        next_sec = 1000.0
        ai, n_actions = 0, len(actions)
        expo = rng.expovariate
        rand = rng.random
        while True:
            t_next = t + expo(rate)
            while True:
                ta = actions[ai][0] if ai < n_actions else _INF
                if next_sec < 60_000.0 and next_sec <= ta and next_sec <= t_next:
                    self.clock(next_sec)
                    self.cross()
                    self.housekeeping()
                    self.flush()
                    next_sec += 1000.0
                elif ta <= t_next and ta < 60_000.0:
                    self.clock(ta)
                    self.cross()
                    self.flush()
                    actions[ai][2]()
                    self.cross()
                    self.flush()
                    ai += 1
                else:
                    break
            if t_next >= 60_000.0:
                break
            t = t_next
            self.clock(t)
            self.cross()
            self.flush()
            u = rand() * rate
            if u < ra:
                self.add_random()
            elif u < rac:
                self.cancel_random()
            else:
                self.market_random()
            self.flush()
        return self.out


# ---------------------------------------------------------------------------------
# episodes: drawing the labels, then acting them out inside a block
# ---------------------------------------------------------------------------------
def _fracs(rng: random.Random, n: int) -> list[float]:
    """n sorted fractions of an interval, the first 0 and the last 1 (n >= 1)."""
    if n <= 1:
        return [0.0]
    inner = sorted(rng.random() for _ in range(n - 2))
    return [0.0, *[round(x, 4) for x in inner], 1.0]


def _draw_episode(kind: str, rng: random.Random, prof: _Profile, t0: int, src: SimulatorSource,
                  near_miss_share: float = NEAR_MISS_SHARE) -> Episode:
    """A random episode of `kind` starting in the minute at t0. Parameters are drawn
    wider than DETECTION.md's starting thresholds so detectors meet near misses too."""
    side = "bid" if rng.random() < 0.5 else "ask"
    p: dict = {}
    # everything ends by this offset in the minute (vacuuming earlier: the move into the
    # gap needs a few seconds before the minute's impact tapers off)
    last = 50_000 if kind == "vacuuming" else 57_000
    if kind in SCHEMES:
        # Most episodes are clear cases of DETECTION.md's definition (every parameter inside
        # its threshold, with room); NEAR_MISS_SHARE of them break exactly one threshold on
        # purpose (parameters["near_miss"] names it) so detectors meet near misses too.
        miss = rng.choice(_NEAR_MISSES[kind]) if rng.random() < near_miss_share else None
        p["near_miss"] = miss
    if kind == "layering":
        n = 2 if miss == "layers" else rng.randint(3, 6)
        sc = prof.tick_scale
        ratios = [round(_lu(rng, 6.0, 25.0), 3) for _ in range(n)]
        if miss == "size_ratio":
            ratios = [round(_lu(rng, 2.0, 4.0), 3) for _ in range(n)]
        p.update(layers=n, distances_ticks=sorted({max(1, round(d * sc)) for d in rng.sample(range(1, 24), n)}),
                 size_ratios=ratios,
                 build_ms=int(_lu(rng, 4500, 9000) if miss == "build_ms" else _lu(rng, 300, 2500)),
                 hold_ms=int(_lu(rng, 2000, 30000)),
                 collapse_ms=int(_lu(rng, 4000, 9000) if miss == "collapse_ms" else _lu(rng, 100, 800)),
                 cancel_fraction=round(rng.uniform(0.35, 0.55) if miss == "cancel_fraction" else rng.uniform(0.8, 1.0), 3),
                 opposite_trade=rng.random() < 0.6, opposite_ratio=round(_lu(rng, 0.3, 3.0), 3),
                 opposite_lead_ms=int(_lu(rng, 50, 1500)), add_fracs=_fracs(rng, n), cancel_fracs=_fracs(rng, n))
        p["layers"] = len(p["distances_ticks"])  # distances collapse on coarse grids
        del p["size_ratios"][p["layers"]:]
        del p["add_fracs"][p["layers"]:]
        del p["cancel_fracs"][p["layers"]:]
        # DETECTION.md's large add is also >= 15 % of the side's top-20 depth
        p["depth_share"] = round(_lu(rng, 0.03, 0.1) if miss == "size_ratio" else _lu(rng, 0.17, 0.4), 3)
        span = [p["build_ms"], p["hold_ms"], p["collapse_ms"]]
    elif kind == "flipping":
        mode = "aggressive" if rng.random() < 0.5 else "mirror"
        if miss == "flip_ratio":
            flip_ratio = _lu(rng, 0.03, 0.1) if mode == "aggressive" else _lu(rng, 0.1, 0.35)
        else:
            flip_ratio = _lu(rng, 0.35, 1.3) if mode == "aggressive" else _lu(rng, 0.65, 1.3)
        p.update(distance_ticks=round(rng.randint(0, 2) * prof.tick_scale),
                 size_ratio=round(_lu(rng, 2.0, 4.0) if miss == "size_ratio" else _lu(rng, 6.0, 25.0), 3),
                 life_ms=int(_lu(rng, 20000, 40000) if miss == "life_ms" else _lu(rng, 300, 9000)),
                 cancel_fraction=round(rng.uniform(0.4, 0.65) if miss == "cancel_fraction" else rng.uniform(0.85, 1.0), 3),
                 flip_latency_ms=int(_lu(rng, 2500, 6000) if miss == "flip_latency_ms" else _lu(rng, 20, 700)),
                 flip_mode=mode, flip_ratio=round(flip_ratio, 3), mirror_rest_ms=int(_lu(rng, 1000, 15000)))
        p["depth_share"] = round(_lu(rng, 0.03, 0.1) if miss == "size_ratio" else _lu(rng, 0.17, 0.4), 3)
        if mode == "aggressive":
            # half the aggressive flips are split into 2-4 taker orders, all printed within
            # 750 ms of the pull (drawn from their own hash: the episode's other draws stay)
            split = random.Random(stable_hash("flip-split", prof.pair, t0, side))
            orders = split.choice((1, 1, 1, 2, 3, 4)) if split.random() < 0.6 else 1
            p["flip_orders"] = orders
            if orders > 1:
                p["flip_spread_ms"] = int(split.uniform(40, max(50, 750 - p["flip_latency_ms"])))
                p["flip_parts"] = [round(split.uniform(0.5, 1.5), 3) for _ in range(orders)]
        if p["distance_ticks"] == 0:
            # half the spoofs at the touch improve it by a tick, so the order stands
            # alone at the best level and its cancel empties that level (drawn from their
            # own hash: the episode's other draws stay)
            alone = random.Random(stable_hash("flip-alone", prof.pair, t0, side))
            p["alone_at_best"] = alone.random() < 0.5
        span = [0, p["life_ms"], p["flip_latency_ms"]]
    elif kind in ("vacuuming", "two_sided_pull", "sweep"):
        levels = rng.randint(3, 10)
        miss = p.get("near_miss")
        p.update(levels=levels, depth_multiplier=round(_lu(rng, 1.15, 1.35) if miss == "depth_multiplier" else _lu(rng, 2.6, 5.0), 3),
                 build_ms=int(_lu(rng, 200, 8000)),
                 rest_ms=int(_lu(rng, 300, 1200) if miss == "rest_ms" else _lu(rng, 2500, 25000)),
                 chunks=rng.randint(levels, 2 * levels))
        p["chunk_fracs"] = _fracs(rng, p["chunks"])
        p["chunk_levels"] = [rng.randrange(levels) for _ in range(p["chunks"])]
        if kind == "vacuuming":
            p.update(pull_ms=int(_lu(rng, 3000, 6000) if miss == "pull_ms" else _lu(rng, 100, 800)),
                     pull_fraction=round(rng.uniform(0.2, 0.4) if miss == "pull_fraction" else rng.uniform(0.75, 1.0), 3),
                     kick_sigma=round(_lu(rng, 0.8, 4.0), 3))
            span = [p["build_ms"], p["rest_ms"], p["pull_ms"]]
        elif kind == "two_sided_pull":
            side = "both"
            p.update(pull_ms=int(_lu(rng, 100, 1000)), pull_fraction=round(rng.uniform(0.5, 1.0), 3))
            span = [p["build_ms"], p["rest_ms"], p["pull_ms"]]
        else:
            p.update(sweep_fraction=round(rng.uniform(0.6, 1.0), 3))
            span = [p["build_ms"], p["rest_ms"], 0]
        p["pull_fracs"] = _fracs(rng, p["chunks"])
    elif kind == "filled_wall":
        p.update(distance_ticks=round(rng.randint(0, 3) * prof.tick_scale), size_ratio=round(_lu(rng, 3.0, 20.0), 3),
                 rest_ms=int(_lu(rng, 500, 10000)), fill_ms=int(_lu(rng, 200, 8000)),
                 fill_chunks=rng.randint(2, 8), fill_fraction=round(rng.uniform(0.8, 1.0), 3))
        span = [0, p["rest_ms"], p["fill_ms"]]
    elif kind == "quote_refresh":
        n = rng.randint(3, 12)
        p.update(size_ratio=round(_lu(rng, 2.0, 10.0), 3), refreshes=n, interval_ms=int(_lu(rng, 200, 2000)),
                 latency_ms=rng.randint(0, 50), shifts=[rng.choice((-1, 0, 0, 1)) for _ in range(n)])
        span = [0, p["interval_ms"], p["interval_ms"] * (n - 1)]
    elif kind == "iceberg":
        n = rng.randint(3, 10)
        p.update(display_ratio=round(_lu(rng, 1.0, 3.0), 3), refills=n, refill_ms=int(_lu(rng, 20, 300)),
                 gap_ms=int(_lu(rng, 300, 3000)))
        span = [0, p["gap_ms"], p["gap_ms"] * (n - 1) + p["refill_ms"]]
    elif kind == "patient_far":
        p.update(distance_frac=round(rng.uniform(0.003, 0.01), 5), size_ratio=round(_lu(rng, 5.0, 30.0), 3),
                 life_ms=int(_lu(rng, 90_000, 600_000)))
        start = t0 + int(rng.uniform(0, 59_000))
        _patient_resolve(p, side, start, prof, src)
        end = start + p["life_ms"]
        return Episode(None, side, None, start, end, end, p, kind, prof.pair)
    else:
        raise ValueError(f"unknown episode kind {kind!r}")
    total = sum(span)
    if total > last - 1000:  # shrink the resting part to fit the minute
        span[1] = max(0, span[1] - (total - (last - 1000)))
        total = sum(span)
    start = t0 + int(rng.uniform(1000, last - total))
    if kind == "layering":
        p["hold_ms"] = span[1]
        collapse = start + span[0] + span[1]
        end = collapse + span[2]
    elif kind in ("flipping", "filled_wall", "quote_refresh", "iceberg"):
        collapse = start + span[1]
        end = collapse + span[2]
    else:
        p["rest_ms"] = span[1]
        collapse = start + span[0] + span[1]
        end = collapse + span[2]
    scheme = kind if kind in SCHEMES else None
    p["tick_scale"] = round(prof.tick_scale, 3)
    return Episode(scheme, side, None, start, collapse, end, p, kind, prof.pair)


def _patient_resolve(p: dict, side: str, start: int, prof: _Profile, src: SimulatorSource) -> None:
    """Absolute tick and size of a patient far order: functions of its start time only."""
    mid = src._mid(prof, start)
    rt = mid / prof.tick
    d = p["distance_frac"] * rt
    p["tick"] = math.floor(rt - d) if side == "bid" else math.ceil(rt + d)
    p["price"] = round(p["tick"] * prof.tick, prof.pdec)
    level = prof.level_usd * _level_shape(_grid_index(d, prof.grid)) / (mid * prof.usd_quote * prof.lot)
    p["lots"] = max(1, int(p["size_ratio"] * level))
    p["qty"] = round(p["lots"] * prof.lot, prof.qdec)


def _with_defaults(ep: Episode, prof: _Profile, src: SimulatorSource) -> Episode:
    """An explicit episode with the parameters it does not give drawn deterministically."""
    rng = random.Random(stable_hash("explicit", src.seed, prof.key, ep.start_ms, ep.kind))
    drawn = _draw_episode(ep.kind, rng, prof, ep.start_ms - ep.start_ms % MINUTE_MS, src, near_miss_share=0.0)
    params = {**drawn.parameters, **ep.parameters}
    side = ep.side
    if ep.kind == "patient_far" and ("tick" not in ep.parameters or "lots" not in ep.parameters):
        params.pop("tick", None)
        params.pop("lots", None)
        _patient_resolve(params, side, ep.start_ms, prof, src)
    if ep.kind == "layering":
        n = params["layers"]
        for key in ("distances_ticks", "size_ratios", "add_fracs", "cancel_fracs"):
            if len(params[key]) != n:
                params[key] = (list(params[key]) * n)[:n] if params[key] else drawn.parameters[key][:n]
    return Episode(ep.scheme, side, ep.direction, ep.start_ms, ep.collapse_start_ms, ep.end_ms, params, ep.kind,
                   prof.pair)


def _episode_actions(blk: _Block, ep: Episode) -> list:
    """(offset ms in the block, seq, callable) for the parts of ep inside this block."""
    p = ep.parameters
    t0 = blk.t0
    acts: list = []

    def at(ts_ms: float, fn) -> None:
        off = ts_ms - t0
        if 0 <= off < MINUTE_MS:
            acts.append((float(off), 0, fn))

    is_bid = ep.side == "bid"
    sign_in = -1 if is_bid else 1  # away from the touch, into the book
    kind = ep.kind
    start, collapse, end = ep.start_ms, ep.collapse_start_ms, ep.end_ms

    if kind == "layering":
        orders: list = []
        build = min(p["build_ms"], max(0, collapse - start))
        for i in range(p["layers"]):
            d, ratio = p["distances_ticks"][i], p["size_ratios"][i]

            def add(d=d, ratio=ratio):
                touch = blk.best(is_bid)
                orders.append(blk.place(is_bid, touch + sign_in * d, max(
                    ratio * blk.typical_lots(is_bid, d), p.get("depth_share", 0.0) * blk.top_depth(is_bid, 20))))

            at(start + p["add_fracs"][i] * build, add)
        if p.get("opposite_trade"):
            at(max(start + build, collapse - p["opposite_lead_ms"]),
               lambda: blk.market(not is_bid, int(p["opposite_ratio"] * blk.trade_lots) + 1))
        for i in range(p["layers"]):
            def cancel(i=i):
                if i < len(orders):
                    blk.pull(orders[i], p["cancel_fraction"])

            at(collapse + p["cancel_fracs"][i] * (end - collapse), cancel)

    elif kind == "flipping":
        box: list = []

        def add():
            touch = blk.best(is_bid)
            # alone at the best: one tick inside the spread (place() keeps it off the other side)
            tick = touch - sign_in if p.get("alone_at_best") else touch + sign_in * p["distance_ticks"]
            box.append(blk.place(is_bid, tick, max(
                p["size_ratio"] * blk.typical_lots(is_bid, p["distance_ticks"]),
                p.get("depth_share", 0.0) * blk.top_depth(is_bid, 20))))

        def cancel():
            if box:
                blk.pull(box[0], p["cancel_fraction"])

        def flip(share=1.0):
            if not box:
                return
            lots = int(share * p["flip_ratio"] * box[0].orig) + 1
            if p["flip_mode"] == "aggressive":
                blk.market(not is_bid, lots)  # a bid spoof flips to selling
            else:
                box.append(blk.place(not is_bid, blk.best(not is_bid), lots))

        def mirror_pull():
            if len(box) > 1:
                blk.pull(box[1])

        at(start, add)
        at(collapse, cancel)
        parts = p.get("flip_parts") or [1.0]
        for n, part in enumerate(parts):  # a split flip: several taker orders
            offset = p.get("flip_spread_ms", 0) * n / max(len(parts) - 1, 1)
            at(end + offset, lambda share=part / sum(parts): flip(share))
        if p["flip_mode"] == "mirror" and end + p["mirror_rest_ms"] - t0 < MINUTE_MS - 1000:
            at(end + p["mirror_rest_ms"], mirror_pull)

    elif kind in ("vacuuming", "two_sided_pull", "sweep"):
        sides = (True, False) if kind == "two_sided_pull" else (is_bid,)
        placed: dict = {s: [] for s in sides}
        build = min(p["build_ms"], max(0, collapse - start))
        state: dict = {}

        def chunk(i):
            for s in sides:
                if s not in state:
                    # the side's top-10 depth becomes depth_multiplier x its usual depth (what a
                    # rolling baseline of the book sees), however thin or deep it is right now
                    usual = blk.src._calibration(blk.prof)["top10"] * blk.level_lots
                    m = p["depth_multiplier"]
                    state[s] = max((m - 1.0) * usual, m * usual - blk.top_depth(s)) / p["chunks"]
                # on the chunk_levels[i]-th visible level of the side: inside its top 10
                keys = blk.bk if s else blk.ak
                k = min(p["chunk_levels"][i], len(keys) - 1)
                tk = (keys[-1 - k] if s else keys[k]) if keys else blk.best(s)
                placed[s].append(blk.place(s, tk, state[s] + 1))

        for i in range(p["chunks"]):
            at(start + p["chunk_fracs"][i] * build, lambda i=i: chunk(i))

        def follow_touch():
            # Whoever shows the depth wants it seen: an order the touch has left behind
            # (outside the side's ten best levels, where the imbalance it causes pushes
            # price) is moved back to its level index, as a pegged order would be.
            for s in sides:
                keys = blk.bk if s else blk.ak
                if len(keys) <= 10:
                    continue
                edge = keys[-10] if s else keys[9]
                for i, o in enumerate(placed[s]):
                    if o.rem > 0 and (o.tick < edge if s else o.tick > edge):
                        lots = blk.pull(o)
                        if lots > 0:
                            k = min(p["chunk_levels"][i], len(keys) - 1)
                            placed[s][i] = blk.place(s, keys[-1 - k] if s else keys[k], lots)

        for t_follow in range(start + build + _FOLLOW_MS, collapse, _FOLLOW_MS):
            at(t_follow, follow_touch)
        if kind == "sweep":
            def sweep():
                s = is_bid
                keys = blk.bk if s else blk.ak
                book = blk.bids if s else blk.asks
                top = keys[-p["levels"]:] if s else keys[:p["levels"]]
                lots = int(sum(book[t] for t in top) * p["sweep_fraction"]) + 1
                blk.market(not s, lots)

            at(collapse, sweep)
        else:
            n = p["chunks"]
            for i in range(n):
                def pull(i=i):
                    for s in sides:
                        for o in placed[s][i::n]:
                            blk.pull(o, p["pull_fraction"])

                at(collapse + p["pull_fracs"][i] * (end - collapse), pull)
            if kind == "vacuuming":
                def kick():
                    # price moves into the gap: takers clear the two levels left at the
                    # touch, and the fair price follows (at least a few ticks, so that
                    # the move shows on coarse-tick pairs too)
                    size = max(p["kick_sigma"] * blk.sig_s * math.sqrt(5.0), 3.0 / blk.r)
                    blk.impact += (-1 if is_bid else 1) * size
                    # ... and every level the new fair price has passed, the remnants of
                    # the pulled orders included (they would otherwise pin the book)
                    fair = blk.r * math.exp((-1 if is_bid else 1) * size)
                    keys, book = (blk.bk, blk.bids) if is_bid else (blk.ak, blk.asks)
                    passed = [t for t in keys[-20:] if t > fair] if is_bid else [t for t in keys[:20] if t < fair]
                    near = keys[-2:] if is_bid else keys[:2]
                    blk.market(not is_bid, sum(book[t] for t in set(near) | set(passed)) + 1)

                at(end + 150, kick)  # the move follows the pull

    elif kind == "filled_wall":
        box = []

        def add():
            touch = blk.best(is_bid)
            box.append(blk.place(is_bid, touch + sign_in * p["distance_ticks"],
                                 p["size_ratio"] * blk.typical_lots(is_bid, p["distance_ticks"])))

        at(start, add)
        n = p["fill_chunks"]
        for i in range(n):
            def fill(i=i):
                if not box or box[0].rem <= 0:
                    return
                o = box[0]
                ahead = blk.queue_ahead(o)
                want = o.orig * p["fill_fraction"] * (i + 1) / n - o.filled
                if want > 0:
                    blk.market(not is_bid, int(ahead + want) + 1, keep_levels=1)

            at(collapse + (end - collapse) * i / max(1, n - 1), fill)

    elif kind == "quote_refresh":
        box = []

        def first():
            box.append(blk.place(is_bid, blk.best(is_bid), p["size_ratio"] * blk.typical_lots(is_bid, 0)))

        at(start, first)
        n = p["refreshes"]
        for i in range(n):
            t_refresh = collapse + (end - collapse) * i / max(1, n - 1)

            def withdraw():
                if box:
                    blk.pull(box[-1])

            def requote(i=i):
                touch = blk.best(is_bid)
                shift = p["shifts"][i]  # +1: one tick more aggressive, -1: one tick back
                tk = touch - sign_in * shift
                size = p["size_ratio"] * blk.typical_lots(is_bid, 0) * (0.8 + 0.04 * ((i * 7919) % 11))
                box.append(blk.place(is_bid, tk, size))

            at(t_refresh, withdraw)
            at(t_refresh + p["latency_ms"], requote)

    elif kind == "iceberg":
        box = []

        def show():
            box.append(blk.place(is_bid, blk.best(is_bid), p["display_ratio"] * blk.typical_lots(is_bid, 0)))

        at(start, show)
        n = p["refills"]
        for i in range(n):
            t_round = collapse + p["gap_ms"] * i

            def hit():
                if not box:
                    return
                o = box[-1]
                if o.rem <= 0:
                    return
                blk.market(not is_bid, int(blk.queue_ahead(o) + o.rem), keep_levels=1)

            def refill():
                if box:
                    o = box[-1]
                    box.append(blk.place(is_bid, o.tick, o.orig))

            at(t_round, hit)
            at(t_round + p["refill_ms"], refill)

    elif kind == "patient_far":
        box = []
        if start < t0:  # resting since an earlier block: part of this block's snapshot
            box.append(blk.place(is_bid, p["tick"], p["lots"]))
        else:
            at(start, lambda: box.append(blk.place(is_bid, p["tick"], p["lots"])))
        at(end, lambda: [blk.pull(o) for o in box])

    # unique sequence numbers keep equal-time actions in creation order
    base = blk.seq_actions
    acts = [(off, base + i, fn) for i, (off, _s, fn) in enumerate(acts)]
    blk.seq_actions = base + len(acts)
    return acts


# ---------------------------------------------------------------------------------
# bars without events
# ---------------------------------------------------------------------------------
def _draws(seed: int, n_uniform: int, n_normal: int) -> tuple[list, list]:
    """Uniforms in [0, 1) and standard normals from a splitmix64 stream (32 bits each)."""
    need = n_uniform + n_normal + (n_normal & 1)
    u = []
    x = seed & _M64
    m64 = _M64
    for _ in range((need + 1) // 2):
        x = (x + 0x9E3779B97F4A7C15) & m64
        z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m64
        z ^= z >> 31
        u.append((z >> 32) * 2.3283064365386963e-10)
        u.append((z & 0xFFFFFFFF) * 2.3283064365386963e-10)
    normals = []
    for i in range(n_uniform, n_uniform + n_normal, 2):
        r = math.sqrt(-2.0 * math.log(1.0 - u[i]))
        a = 6.283185307179586 * u[i + 1]
        normals.append(r * math.cos(a))
        normals.append(r * math.sin(a))
    return u[:n_uniform], normals


def _poisson_u(lam: float, u: float, z: float) -> int:
    """A Poisson count from one uniform (inversion) or, for large means, one normal."""
    if lam <= 0:
        return 0
    if lam > 40:
        return max(0, int(lam + math.sqrt(lam) * z + 0.5))
    k, p = 0, math.exp(-lam)
    cdf = p
    while u > cdf and k < 200:
        k += 1
        p *= lam / k
        cdf += p
    return k


def _synth_bar(src: SimulatorSource, prof: _Profile, cal: dict, t: int, step: int, pts: list, fine: float,
               act: float, key: int) -> Bar:
    u, z = _draws(_mix64(key ^ (t // step)), 8, 12)
    secs = step // SECOND_MS
    tick, pdec = prof.tick, prof.pdec
    rate = prof.rate_scale * act
    bar = Bar(ts_ms=t)
    count = _poisson_u(cal["trades"] * rate * secs * math.exp(0.25 * z[0]), u[0], z[1])
    n_pts = len(pts)
    first, last = pts[0], pts[-1]
    mid_mean = (sum(pts) - (first + last) / 2) / (n_pts - 1)
    half_spread = cal["spread_mean"] * tick / 2
    if count:
        open_ = round(first + (half_spread if u[1] < 0.5 else -half_spread), pdec)
        close = round(last + (half_spread if u[2] < 0.5 else -half_spread), pdec)
        if count == 1:
            high = low = close = open_
        else:
            # the range: path extremes, the unsampled path between samples, trade noise
            ext = cal["ext"] * (1.0 + 0.35 * math.log(step / MINUTE_MS)) * min(1.0, count / 20.0)
            high = max(pts) * (1.0 + ext * (0.6 + 0.8 * u[3]) + abs(z[2]) * 0.7 * fine)
            low = min(pts) * (1.0 - ext * (0.6 + 0.8 * u[4]) - abs(z[3]) * 0.7 * fine)
            high = max(round(high, pdec), open_, close)
            low = min(round(low, pdec), open_, close)
        var_path = sum((x - mid_mean) ** 2 for x in pts) / n_pts
        var = var_path + (mid_mean * fine) ** 2 * 0.3 + cal["var_excess"] * mid_mean * mid_mean
        half_range = (high - low) / 2
        if var > half_range * half_range:
            var = half_range * half_range
        sd_mean = math.sqrt(var / count)
        mean = min(high, max(low, mid_mean + z[4] * sd_mean))
        qty_mean = prof.trade_usd * cal["qty"] / (mid_mean * prof.usd_quote)
        volume = count * qty_mean * math.exp(z[5] * 0.35 / math.sqrt(max(1.0, count / 30)))
        volume = max(volume, count * prof.lot)
        move = math.log(last / first) / max(1e-9, fine * math.sqrt(n_pts) + math.sqrt(cal["var_excess"]))
        buy_share = min(0.95, max(0.05, cal["buy_share"] + 0.1 * math.tanh(move) + 0.03 * z[6]))
        vwap = min(high, max(low, mean + 0.3 * z[7] * sd_mean))
        bar.trade_count = count
        bar.open, bar.high, bar.low, bar.close = open_, high, low, close
        bar.volume = volume
        bar.buy_volume = volume * buy_share
        bar.sell_volume = volume - bar.buy_volume
        bar.notional = volume * vwap
        bar.price_mean = mean
        bar.price_m2 = var * count if count > 1 else 0.0
    # the book, one sample a second: depth within 1 % in base quantity, levels
    depth = cal["depth"] * prof.level_usd / (mid_mean * prof.usd_quote) * secs
    z1, z2 = 0.08 * z[8], 0.08 * z[9]
    bar.book_samples = secs
    bar.bid_amount_sum = amount = depth * math.exp(z1)
    bar.bid_notional_sum = amount * mid_mean * 0.9975
    bar.ask_amount_sum = amount = depth * math.exp(z2)
    bar.ask_notional_sum = amount * mid_mean * 1.0025
    orders = cal["orders"] * secs
    bar.bid_orders_sum = int(orders * (1.0 + 0.4 * z1))
    bar.ask_orders_sum = int(orders * (1.0 + 0.4 * z2))
    # quotes
    quotes = _poisson_u(cal["quotes"] * rate * secs, u[5], z[10])
    if quotes:
        to_bps = tick / mid_mean * 1e4
        bar.quote_count = quotes
        bar.spread_bps_sum = cal["spread_mean"] * to_bps * quotes * (0.9 + 0.2 * u[6])
        bar.spread_bps_min = cal["spread_min"] * to_bps
        bar.spread_bps_max = max(bar.spread_bps_sum / quotes, cal["spread_max"] * to_bps * (0.8 + 0.45 * u[7])
                                 * (1.0 + 0.25 * math.log(step / MINUTE_MS + 1)))
        spread_ticks = max(1, round(cal["spread_mean"]))
        bid_t = math.floor(last / tick - spread_ticks / 2)
        bar.bid_price = round(bid_t * tick, pdec)
        bar.ask_price = round((bid_t + spread_ticks) * tick, pdec)
    return bar


