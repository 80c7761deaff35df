"""Hour, day and minute bars drawn from the price path without generating events, for
seeding long histories."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from market.bars import Bar, MINUTE_MS, SECOND_MS

from .flow import _M64, _mix64

if TYPE_CHECKING:
    from .profiles import _Profile
    from .source import SimulatorSource


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
