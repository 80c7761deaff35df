"""Synthetic bar history at scale: tens of millions of bars in columns (numpy arrays), for
measuring reads on a store the size of a real one. Plain Python (numpy), no Django.

One pair's history is a random walk of its mid price with a daily activity cycle. Each
bar holds what market/bars.py's Bar holds and keeps its rules: a bar with trades has
low <= open, close, price_mean, vwap <= high, buy + sell = volume, notional = volume x
vwap, a population variance no wider than the range; a bar with quotes has bid < ask on
the tick and spread_bps_min <= average <= spread_bps_max; the book is sampled once a
second (an hour bar holds 3,600 samples) with its notional near the mid. Seconds without
a trade or a quote hold nulls where Bar holds None. Coarser bars of the synthesised
seconds are their roll-ups (`roll_up`); hours before the seconds are drawn directly at
the hour, continuing the same walk. Deterministic in (seed, pair index)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .bars import BAR_FIELDS, SECOND_MS

# Bar fields that are None when the bar has no trade, no quote
TRADE_NULLABLE = ("open", "high", "low", "close")
QUOTE_NULLABLE = ("bid_price", "ask_price", "spread_bps_min", "spread_bps_max")
INTEGER_FIELDS = ("ts_ms", "trade_count", "book_samples", "bid_orders_sum", "ask_orders_sum", "quote_count")


@dataclass(frozen=True)
class Profile:
    """What sets one pair apart: its price level, tick, lot and activity."""

    price: float
    price_decimals: int  # the tick is 10 ** -price_decimals
    amount_decimals: int  # the amount increment is 10 ** -amount_decimals
    lot: float  # the typical trade size, base asset
    trades_per_second: float
    quotes_per_second: float
    depth_lots: float  # resting depth within 1 % of mid, per side, in lots
    sigma_per_second: float  # of the log mid

    @property
    def tick(self) -> float:
        return 10.0 ** -self.price_decimals


def profile(*, seed: int, index: int) -> Profile:
    """The pair's profile: prices from a hundredth to tens of thousands, ~7 significant
    digits of tick, a lot worth ~100-1,000 of the quote, a few trades a second."""
    rng = np.random.default_rng([seed, index, 1])
    price = float(10 ** rng.uniform(-2, 4.8))
    price_decimals = max(0, 6 - math.floor(math.log10(price)))
    lot = float(10 ** rng.uniform(2, 3)) / price
    amount_decimals = max(0, 3 - math.floor(math.log10(lot)))
    return Profile(price=round(price, price_decimals), price_decimals=price_decimals,
                   amount_decimals=amount_decimals, lot=lot,
                   trades_per_second=float(rng.uniform(0.5, 6)), quotes_per_second=float(rng.uniform(2, 12)),
                   depth_lots=float(rng.uniform(20, 200)), sigma_per_second=float(rng.uniform(0.5e-4, 1.5e-4)))


def _activity(ts_ms: np.ndarray, rng) -> np.ndarray:
    """Busier in the European and American afternoons, quieter at night, with bursts."""
    hour = (ts_ms % 86_400_000) / 3_600_000
    cycle = 1.0 + 0.5 * np.sin((hour - 9.0) / 24.0 * 2 * np.pi)
    return cycle * rng.lognormal(0.0, 0.35, ts_ms.size)


def bars(prof: Profile, rng, *, start_ms: int, count: int, step_ms: int, first_price: float
         ) -> tuple[dict[str, np.ndarray], float]:
    """`count` consecutive bars of `step_ms` from start_ms, the walk starting at
    first_price: Bar's fields as arrays (NaN where Bar holds None), and the last mid."""
    seconds = step_ms // SECOND_MS
    ts = start_ms + np.arange(count, dtype=np.int64) * step_ms
    act = _activity(ts, rng)
    tick, pd, ad = prof.tick, prof.price_decimals, prof.amount_decimals
    # the mid: a random walk of the log price, faster when busier
    steps = rng.standard_normal(count) * prof.sigma_per_second * np.sqrt(seconds * act)
    log_mid = math.log(first_price) + np.cumsum(steps)
    mid_close = np.exp(log_mid)
    mid_open = np.concatenate(([first_price], mid_close[:-1]))
    floor_price = tick * 10

    # trades
    n = rng.poisson(prof.trades_per_second * seconds * act).astype(np.int64)
    traded = n > 0
    spread_px = np.maximum(tick, mid_close * 2e-5)
    open_ = np.maximum(np.round(mid_open + rng.standard_normal(count) * spread_px, pd), floor_price)
    close = np.maximum(np.round(mid_close + rng.standard_normal(count) * spread_px, pd), floor_price)
    reach = np.abs(steps) * mid_close * 0.5 + spread_px
    high = np.round(np.maximum(open_, close) + np.abs(rng.standard_normal(count)) * reach, pd)
    low = np.maximum(np.round(np.minimum(open_, close) - np.abs(rng.standard_normal(count)) * reach, pd),
                     floor_price)
    low = np.minimum(low, np.minimum(open_, close))
    single = n == 1  # one trade: one price
    close = np.where(single, open_, close)
    high = np.where(single, open_, high)
    low = np.where(single, open_, low)
    width = high - low
    price_mean = np.clip((open_ + close) / 2 + rng.standard_normal(count) * width / 8, low, high)
    vwap = np.clip(price_mean + rng.standard_normal(count) * width / 16, low, high)
    # population variance m2 / n at most (width / 2)^2
    price_m2 = np.where(n > 1, (n - 1) * (width / 4) ** 2 * rng.uniform(0.2, 1.0, count), 0.0)
    size_step = 10.0 ** -ad
    volume = np.round(rng.gamma(np.maximum(n, 1), prof.lot), ad)
    volume = np.where(traded, np.maximum(volume, size_step * n), 0.0)
    buy = np.round(volume * rng.beta(2.0, 2.0, count), ad)
    sell = np.round(volume - buy, ad)
    volume = np.round(buy + sell, ad)
    notional = volume * vwap

    # the book, one sample a second
    samples = np.full(count, seconds, dtype=np.int64)
    depth = prof.depth_lots * prof.lot * seconds
    bid_amount = np.round(depth * rng.lognormal(0.0, 0.3, count), ad)
    ask_amount = np.round(depth * rng.lognormal(0.0, 0.3, count), ad)
    orders_mean = prof.depth_lots * 0.4 * seconds
    bid_orders = rng.poisson(orders_mean, count).astype(np.int64)
    ask_orders = rng.poisson(orders_mean, count).astype(np.int64)
    bid_notional = bid_amount * mid_close * 0.996
    ask_notional = ask_amount * mid_close * 1.004

    # quotes: the last best bid / ask on the tick, and the spread over the updates
    quotes = rng.poisson(prof.quotes_per_second * seconds * act).astype(np.int64)
    quoted = quotes > 0
    spread_ticks = np.maximum(1.0, np.round(spread_px / tick * rng.uniform(0.5, 2.0, count)))
    bid = np.round(np.floor(mid_close / tick - spread_ticks / 2) * tick, pd)
    bid = np.maximum(bid, tick)
    ask = np.round(bid + spread_ticks * tick, pd)
    last_bps = (ask - bid) / ((ask + bid) / 2) * 10_000
    one_tick_bps = tick / ((ask + bid) / 2) * 10_000
    bps_min = np.where(quotes > 1, np.minimum(last_bps, one_tick_bps * np.maximum(1.0, spread_ticks - 1)), last_bps)
    bps_max = np.where(quotes > 1, last_bps * rng.uniform(1.0, 1.8, count), last_bps)
    bps_avg = bps_min + (bps_max - bps_min) * rng.uniform(0.2, 0.8, count)

    def traded_only(values):
        return np.where(traded, values, np.nan)

    def quoted_only(values):
        return np.where(quoted, values, np.nan)

    columns = {
        "ts_ms": ts, "trade_count": n,
        "open": traded_only(open_), "high": traded_only(high), "low": traded_only(low), "close": traded_only(close),
        "volume": volume, "buy_volume": np.where(traded, buy, 0.0), "sell_volume": np.where(traded, sell, 0.0),
        "notional": np.where(traded, notional, 0.0), "price_mean": np.where(traded, price_mean, 0.0),
        "price_m2": price_m2,
        "book_samples": samples, "bid_amount_sum": bid_amount, "ask_amount_sum": ask_amount,
        "bid_notional_sum": bid_notional, "ask_notional_sum": ask_notional,
        "bid_orders_sum": bid_orders, "ask_orders_sum": ask_orders,
        "quote_count": quotes, "bid_price": quoted_only(bid), "ask_price": quoted_only(ask),
        "spread_bps_sum": np.where(quoted, bps_avg * quotes, 0.0),
        "spread_bps_min": quoted_only(bps_min), "spread_bps_max": quoted_only(bps_max),
    }
    return columns, float(mid_close[-1]) if count else first_price


def roll_up(columns: dict[str, np.ndarray], step_ms: int) -> dict[str, np.ndarray]:
    """The bars of `step_ms` made of the given consecutive bars (in time order), merged as
    market.bars.merge merges them: sums, first and last, extremes, Chan's mean and M2."""
    ts = columns["ts_ms"]
    if ts.size == 0:
        return {name: ts[:0].copy() for name in BAR_FIELDS}
    period = ts - ts % step_ms
    starts = np.flatnonzero(np.concatenate(([True], period[1:] != period[:-1])))
    lengths = np.diff(np.append(starts, ts.size))
    index = np.arange(ts.size)
    out = {"ts_ms": period[starts]}
    for name in ("trade_count", "volume", "buy_volume", "sell_volume", "notional", "price_m2", "book_samples",
                 "bid_amount_sum", "ask_amount_sum", "bid_notional_sum", "ask_notional_sum", "bid_orders_sum",
                 "ask_orders_sum", "quote_count", "spread_bps_sum"):
        out[name] = np.add.reduceat(columns[name], starts)
    n = columns["trade_count"]
    traded, quoted = n > 0, columns["quote_count"] > 0
    first = np.minimum.reduceat(np.where(traded, index, ts.size), starts)
    last = np.maximum.reduceat(np.where(traded, index, -1), starts)
    any_trade = last >= 0
    out["open"] = np.where(any_trade, columns["open"][np.minimum(first, ts.size - 1)], np.nan)
    out["close"] = np.where(any_trade, columns["close"][last], np.nan)
    out["high"] = np.fmax.reduceat(columns["high"], starts)
    out["low"] = np.fmin.reduceat(columns["low"], starts)
    total = out["trade_count"]
    weighted = np.add.reduceat(n * columns["price_mean"], starts)
    mean = np.divide(weighted, total, out=np.zeros(total.size), where=total > 0)
    deviation = columns["price_mean"] - np.repeat(mean, lengths)
    out["price_mean"] = mean
    out["price_m2"] = out["price_m2"] + np.add.reduceat(np.where(traded, n * deviation * deviation, 0.0), starts)
    quote_last = np.maximum.reduceat(np.where(quoted, index, -1), starts)
    any_quote = quote_last >= 0
    out["bid_price"] = np.where(any_quote, columns["bid_price"][quote_last], np.nan)
    out["ask_price"] = np.where(any_quote, columns["ask_price"][quote_last], np.nan)
    out["spread_bps_min"] = np.fmin.reduceat(columns["spread_bps_min"], starts)
    out["spread_bps_max"] = np.fmax.reduceat(columns["spread_bps_max"], starts)
    return {name: out[name] for name in BAR_FIELDS}


def concatenate(*parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([part[name] for part in parts]) for name in BAR_FIELDS}


# -- PostgreSQL's binary COPY, built by numpy ---------------------------------------------

COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
COPY_TRAILER = b"\xff\xff"
# the PostgreSQL column types a bar field may be stored as, and their wire format
BINARY_TYPES = {"smallint": ">i2", "integer": ">i4", "bigint": ">i8", "real": ">f4", "double precision": ">f8"}


def copy_rows(columns: dict[str, np.ndarray], names: list[str], types: list[str], constants: dict[str, int]
              ) -> bytes:
    """The tuples of a binary COPY (no signature, no trailer) of `names` in order, each
    column sent as its PostgreSQL type (`types`, keys of BINARY_TYPES); a name in
    `constants` is that integer in every row, NaN is NULL. Rows are grouped by which
    columns are null, so each group is one fixed-width record array."""
    size = columns["ts_ms"].size
    nulls = {name: np.isnan(values) for name, values in columns.items() if values.dtype.kind == "f"}
    null_names = [name for name in names if name in nulls]
    if null_names:
        pattern = np.zeros(size, dtype=np.int64)
        for bit, name in enumerate(null_names):
            pattern |= nulls[name].astype(np.int64) << bit
        groups = [(p, np.flatnonzero(pattern == p)) for p in np.unique(pattern)]
    else:
        groups = [(0, np.arange(size))]
    out = []
    for p, rows in groups:
        null = {name for bit, name in enumerate(null_names) if p >> bit & 1}
        fields = [("count", ">i2")]
        for name, kind in zip(names, types):
            fields.append((f"{name}_length", ">i4"))
            if name not in null:
                fields.append((name, BINARY_TYPES[kind]))
        record = np.empty(rows.size, dtype=fields)
        record["count"] = len(names)
        for name, kind in zip(names, types):
            if name in null:
                record[f"{name}_length"] = -1
                continue
            record[f"{name}_length"] = np.dtype(BINARY_TYPES[kind]).itemsize
            values = constants[name] if name in constants else columns[name][rows]
            if np.dtype(BINARY_TYPES[kind]).kind == "i":
                limit = np.iinfo(BINARY_TYPES[kind])
                if not isinstance(values, int) and values.size and (
                        values.min() < limit.min or values.max() > limit.max):
                    raise OverflowError(f"{name} does not fit a PostgreSQL {kind}")
            record[name] = values
        out.append(record.tobytes())
    return b"".join(out)


def minute_packs(columns: dict[str, np.ndarray]) -> tuple[list[int], list[int], list[bytes]]:
    """Second bars (columns of whole minutes, every second present, NaN for NULL) as packs
    (market/bar_pack.py): each minute's start, seconds mask and data."""
    from .bar_pack import NULLABLE_FIELDS, VALUE_FIELDS, INTEGER_FIELDS as PACK_INTEGERS, encode_raw

    size = int(columns["ts_ms"].size)
    if size % 60 or (size and columns["ts_ms"][0] % 60_000):
        raise ValueError("packs hold whole minutes")
    minutes = size // 60
    weights = np.left_shift(np.uint64(1), np.arange(60, dtype=np.uint64))
    masks, values = [], []
    for name in VALUE_FIELDS:
        matrix = columns[name].reshape(minutes, 60).astype("<i8" if name in PACK_INTEGERS else "<f8")
        if name in NULLABLE_FIELDS:
            null = np.isnan(matrix)
            masks.append((null.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64).tolist())
            values.append([row[~flags].tobytes() for row, flags in zip(matrix, null)])
        else:
            values.append([row.tobytes() for row in matrix])
    everything = (1 << 60) - 1
    data = [encode_raw([mask[i] for mask in masks], [field[i] for field in values]) for i in range(minutes)]
    return columns["ts_ms"][::60].tolist(), [everything] * minutes, data
