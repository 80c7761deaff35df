"""The codec of packed second bars (market/bar_pack.py): plain Python, no database."""

import math
import struct

import pytest

from market import bar_pack
from market.bars import BAR_FIELDS, Bar

MINUTE = 1_700_000_040_000 - 1_700_000_040_000 % 60_000


def busy(second: int, **changes) -> Bar:
    bar = Bar(ts_ms=MINUTE + second * 1000, trade_count=3 + second, open=100.5 + second, high=101.25, low=99.75,
              close=100.0 + second / 7, volume=1.5, buy_volume=1.0, sell_volume=0.5, notional=150.75,
              price_mean=100.25, price_m2=0.5 / (second + 1), book_samples=1, bid_amount_sum=20.5,
              ask_amount_sum=19.25, bid_notional_sum=2050.0, ask_notional_sum=1930.0, bid_orders_sum=2 ** 40 + second,
              ask_orders_sum=38, quote_count=4, bid_price=100.0, ask_price=100.5, spread_bps_sum=2.0,
              spread_bps_min=0.4, spread_bps_max=0.6)
    for name, value in changes.items():
        setattr(bar, name, value)
    return bar


def row(bar: Bar) -> tuple:
    return tuple(getattr(bar, name) for name in BAR_FIELDS)


def bits(value) -> bytes | None:
    return None if value is None else struct.pack("<d", value) if isinstance(value, float) else value


def round_trip(bars: list[Bar]) -> list[tuple]:
    seconds, data = bar_pack.encode(MINUTE, [row(bar) for bar in bars])
    return bar_pack.decode(MINUTE, seconds, data)


def test_the_fields_are_derived_from_bar():
    assert bar_pack.VALUE_FIELDS == BAR_FIELDS[1:]
    assert set(bar_pack.NULLABLE_FIELDS) == {"open", "high", "low", "close", "bid_price", "ask_price",
                                             "spread_bps_min", "spread_bps_max"}
    assert bar_pack.INTEGER_FIELDS == {"trade_count", "book_samples", "bid_orders_sum", "ask_orders_sum",
                                       "quote_count"}


def test_a_full_minute_round_trips_every_field_with_its_type():
    bars = [busy(second) for second in range(60)]
    decoded = round_trip(bars)
    assert decoded == [row(bar) for bar in bars]
    for got, want in zip(decoded, bars):
        assert [type(value) for value in got] == [type(value) for value in row(want)]


def test_nulls_come_back_as_none_where_they_were_in_any_field():
    bars = [busy(0), Bar(ts_ms=MINUTE + 1000, book_samples=1, bid_amount_sum=3.0),
            busy(2, bid_price=None, ask_price=None, spread_bps_min=None, spread_bps_max=None),
            busy(3, open=None, high=None, low=None, close=None, trade_count=0)]
    assert round_trip(bars) == [row(bar) for bar in bars]


def test_a_partial_minute_keeps_which_seconds_are_present():
    bars = [busy(second) for second in (0, 7, 8, 59)]
    seconds, data = bar_pack.encode(MINUTE, [row(bar) for bar in bars])
    assert seconds == (1 << 0) | (1 << 7) | (1 << 8) | (1 << 59)
    assert [r[0] for r in bar_pack.decode(MINUTE, seconds, data)] == [MINUTE + s * 1000 for s in (0, 7, 8, 59)]
    assert bar_pack.last_ts(MINUTE, seconds) == MINUTE + 59_000


def test_special_floats_round_trip_bit_for_bit():
    nan = struct.unpack("<d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]  # a NaN with a payload
    bar = busy(5, open=-0.0, high=math.inf, low=-math.inf, close=nan, volume=5e-324, notional=1.7976931348623157e308,
               bid_orders_sum=-(2 ** 63), ask_orders_sum=2 ** 63 - 1)
    (decoded,) = round_trip([bar])
    assert [bits(value) for value in decoded] == [bits(value) for value in row(bar)]
    assert math.copysign(1, decoded[BAR_FIELDS.index("open")]) == -1


def test_a_pack_decodes_only_the_columns_asked_for_in_their_order():
    bars = [busy(second, close=None if second % 2 else 7.0) for second in range(10)]
    seconds, data = bar_pack.encode(MINUTE, [row(bar) for bar in bars])
    assert bar_pack.decode(MINUTE, seconds, data, ("close", "ts_ms")) == [(bar.close, bar.ts_ms) for bar in bars]


def test_a_pack_holds_at_least_one_bar_each_at_a_whole_second_of_its_minute_in_order():
    with pytest.raises(ValueError):
        bar_pack.encode(MINUTE, [])
    for stamps in ([MINUTE + 500], [MINUTE + 60_000], [MINUTE - 1000], [MINUTE + 2000, MINUTE + 1000],
                   [MINUTE, MINUTE]):
        with pytest.raises(ValueError):
            bar_pack.encode(MINUTE, [row(Bar(ts_ms=ts)) for ts in stamps])


def test_data_of_an_unknown_format_or_the_wrong_seconds_is_refused():
    seconds, data = bar_pack.encode(MINUTE, [row(busy(0)), row(busy(1))])
    with pytest.raises(ValueError):
        bar_pack.decode(MINUTE, seconds, b"\x02" + data[1:])
    with pytest.raises(ValueError):
        bar_pack.decode(MINUTE, seconds | 1 << 30, data)


def test_counting_a_pack_s_seconds_in_a_range():
    seconds = (1 << 0) | (1 << 10) | (1 << 59)
    assert bar_pack.count_between(MINUTE, seconds, MINUTE, MINUTE + 60_000) == 3
    assert bar_pack.count_between(MINUTE, seconds, MINUTE + 1, MINUTE + 60_000) == 2
    assert bar_pack.count_between(MINUTE, seconds, MINUTE - 5000, MINUTE + 10_000) == 1
    assert bar_pack.count_between(MINUTE, seconds, MINUTE + 10_000, MINUTE + 10_001) == 1
    assert bar_pack.count_between(MINUTE, seconds, MINUTE + 60_000, MINUTE + 120_000) == 0


def read_rows(packed: list[list[Bar]], hot: list[Bar], columns=BAR_FIELDS) -> list[tuple]:
    """What a read of both tiers returns: rows with (None, None) last, packs as their minute."""
    at = columns.index("ts_ms")
    rows = []
    for bars in packed:
        minute = bar_pack.minute_of(bars[0].ts_ms)
        seconds, data = bar_pack.encode(minute, [row(bar) for bar in bars])
        rows.append(tuple(minute if i == at else None for i in range(len(columns))) + (seconds, data))
    rows += [tuple(getattr(bar, name) for name in columns) + (None, None) for bar in hot]
    return sorted(rows, key=lambda r: r[at])


def test_merging_the_tiers_gives_the_bars_of_the_range_in_time_order():
    first = [busy(s) for s in range(60)]
    second = [Bar(**{**{f: getattr(busy(s), f) for f in BAR_FIELDS}, "ts_ms": MINUTE + 60_000 + s * 1000})
              for s in range(0, 60, 2)]
    hot = [Bar(ts_ms=MINUTE + 120_000 + s * 1000, trade_count=s) for s in range(5)]
    everything = [row(bar) for bar in first + second + hot]
    rows = read_rows([first, second], hot)
    assert bar_pack.merged(rows, BAR_FIELDS, MINUTE, MINUTE + 180_000) == everything
    inside = [r for r in everything if MINUTE + 30_500 <= r[0] < MINUTE + 121_000]
    hot_inside = [bar for bar in hot if bar.ts_ms < MINUTE + 121_000]  # rows come from the range only
    assert bar_pack.merged(read_rows([first, second], hot_inside), BAR_FIELDS, MINUTE + 30_500,
                           MINUTE + 121_000) == inside
    assert bar_pack.merged(rows, BAR_FIELDS, MINUTE, MINUTE + 180_000, limit=70) == everything[:70]
    columns = ("ts_ms", "close", "bid_price")
    assert bar_pack.merged(read_rows([first, second], hot, columns), columns, MINUTE, MINUTE + 180_000) == [
        (r[0], r[BAR_FIELDS.index("close")], r[BAR_FIELDS.index("bid_price")]) for r in everything]


def test_a_second_found_both_as_a_row_and_in_a_pack_is_taken_from_its_row():
    packed = [busy(s) for s in range(60)]
    newer = busy(10, close=1.0)
    merged = bar_pack.merged(read_rows([packed], [newer]), BAR_FIELDS, MINUTE, MINUTE + 60_000)
    assert merged == [row(newer if bar.ts_ms == newer.ts_ms else bar) for bar in packed]
