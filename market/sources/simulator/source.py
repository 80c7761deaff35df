"""SimulatorSource: the offline market source (events, labelled episodes and synthesized
bars), a pure function of (seed, pair, time)."""

from __future__ import annotations

import math
import random
import threading
from collections import OrderedDict
from typing import Iterable, Iterator, TYPE_CHECKING

from market.bars import Bar, DAY_MS, HOUR_MS, MINUTE_MS, merge
from market.sources.events import Event, PairRef

from .bars import _synth_bar
from .block import _Block
from .episodes import HARD_NEGATIVES, SCHEMES, _MAX_SPAN_MIN, _draw_episode, _with_defaults
from .flow import _BOOK_SPAN, _EXCHANGE_ACTIVITY, _MARKET_SIGMA, _Octaves, _QUOTE_ACTIVITY, _USD_TICKS, _asset, _decimals, stable_hash
from .profiles import _CYCLE_MEAN, _OCCUPANCY, _Profile, _grid_count, _grid_distances, _solve_c, _usual_book

if TYPE_CHECKING:
    from .episodes import Episode
    from .flow import _Asset


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
        self._resting: dict = {}  # (pair key, kind, side, start_ms) -> share resting at the pull
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
        half_spread = 0.5 + 2.0 * (1 - min(1.0, liquidity)) * (stable_hash("spread", key) & 0xFF) / 255
        c = _solve_c(span_ticks, half_spread, n_levels)
        grid = _grid_distances(c, half_spread, span_ticks * 1.1)
        depth_usd = 6.0e6 * liquidity**1.5  # per side within 1 %
        in_band = max(3.0, _OCCUPANCY * _grid_count(c, half_spread, 0.01 * p0 / tick))
        level_usd = depth_usd / in_band / 1.1
        # the fair price moves ~0.3 sigma_1s a second at 1 s resolution: on pairs where that is
        # many ticks (BTC: ~100) spoof distances are drawn in multiples of a quarter of it
        tick_scale = max(1.0, 0.3 * sigma / math.sqrt(86_400) * p0 / tick / 4)
        prof = _Profile(norm, key, p0, aq.usd, tick, _decimals(tick), lot, _decimals(lot), liquidity,
                        0.3 + 0.7 * min(1.0, liquidity), sigma, c, half_spread, n_levels, level_usd, trade_usd, tick_scale,
                        grid, depth_usd)
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
        played = _Block(self, prof, m, rng, active)
        block = played.run()
        with self._lock:
            if len(self._resting) > 100_000:  # bounded memory (a live source plays for ever): start over
                self._resting.clear()
            for (kind, side, start_ms), share in played.resting_at_pull.items():
                self._resting[(prof.key, kind, side, start_ms)] = share
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

    def resting_at_pull(self, pair: PairRef, ep: Episode) -> float | None:
        """The share of what a spoofing episode placed that still rested when its pull began
        (None when it records no pull: not a spoofing episode, or an episode this source
        does not play). Takers filling the orders first leave little or nothing to pull: the
        episode did not happen as drawn."""
        prof = self._profile(pair)
        key = (prof.key, ep.kind, ep.side, ep.start_ms)
        with self._lock:
            if key in self._resting:
                return self._resting[key]
        self._block(prof, ep.collapse_start_ms // MINUTE_MS)  # plays the pull's minute (again)
        with self._lock:
            return self._resting.get(key)

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
        ab, base_path = self._asset_path(prof.pair.base)
        aq, quote_path = self._asset_path(prof.pair.quote)
        var = 0.0
        for path in (base_path, quote_path):
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
            usual = _usual_book(events, prof.pair, lot)
            for key in ("top10", "top20", "touch"):
                vals[key] = usual[key] / blk.level_lots
            vals["taker_second"] = usual["taker_second"] / (blk.trade_lots * rate)
            for key, v in vals.items():
                acc[key] = acc.get(key, 0.0) + v
            n += 1
        cal = {key: v / n for key, v in acc.items()}
        cal["spread_min"] = max(1.0, round(cal["spread_min"]))
        cal["buy_share"] = min(0.55, max(0.45, cal["buy_share"]))
        self._paths[("calibration", prof.key)] = cal
        return cal
