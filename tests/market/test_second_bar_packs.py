"""Second bars in two tiers: the seconds of a minute the writes have passed the end of are
packed into one row (SecondBarPack) in the writing transaction, and every reader sees the
packed and the row-stored seconds merged, as if all were rows."""

import pytest
from django.db import connection

from config import clock
from market.bars import BAR_FIELDS, DAY_MS, MINUTE_MS, Bar
from market.models import MinuteBar, SecondBar, SecondBarPack
from market.partitions import partition_name
from market.selectors import (bars_page, bars_range, second_bar_last_ts, second_bars_count, series_rows)
from market.services import bars_purge, bars_write, bars_write_many, catalog_seed_demo

from .test_bar_store import T0, trade_bar


@pytest.fixture
def pairs(db):
    return catalog_seed_demo()[:2]


def quoted(bar: Bar, second: int) -> Bar:
    """Every other second quoted, every third traded: NULLs in every nullable field."""
    if second % 2:
        bar.quote_count, bar.bid_price, bar.ask_price = 2, 99.5 + second, 100.5 + second
        bar.spread_bps_sum, bar.spread_bps_min, bar.spread_bps_max = 1.5, 0.5, 1.0
    return bar


def seconds(start_s: int, end_s: int, base: float = 100.0) -> list[Bar]:
    return [quoted(trade_bar(T0 + s * 1000, [base + s / 3] if s % 3 else [], book=bool(s % 5)), s)
            for s in range(start_s, end_s)]


def rows_of(pair) -> list[int]:
    return list(SecondBar.objects.filter(pair=pair).order_by("ts_ms").values_list("ts_ms", flat=True))


def packs_of(pair) -> list[int]:
    return list(SecondBarPack.objects.filter(pair=pair).order_by("minute_ts_ms").values_list("minute_ts_ms", flat=True))


def as_rows(bars) -> list[tuple]:
    return [tuple(getattr(bar, name) for name in BAR_FIELDS) for bar in bars]


def read(pair, from_ms=T0, to_ms=T0 + DAY_MS) -> list[tuple]:
    return as_rows(bars_range(pair=pair, granularity="second", from_ms=from_ms, to_ms=to_ms))


def test_a_minute_is_packed_once_a_second_after_its_end_is_written(pairs):
    pair = pairs[0]
    bars_write(pair=pair, granularity="second", bars=seconds(0, 60))
    assert packs_of(pair) == [] and len(rows_of(pair)) == 60  # the minute may still get seconds
    bars_write(pair=pair, granularity="second", bars=seconds(60, 61))
    assert packs_of(pair) == [T0] and rows_of(pair) == [T0 + MINUTE_MS]
    assert read(pair) == as_rows(seconds(0, 61))


def test_ticks_of_a_few_seconds_pack_each_minute_they_close_for_all_pairs_together(pairs):
    for start in range(0, 190, 5):  # ticks of 5 s, as ingestion writes them
        bars_write_many(granularity="second", bars_by_pair=[
            (pair, seconds(start, start + 5, base=100.0 * (i + 1))) for i, pair in enumerate(pairs)])
    for i, pair in enumerate(pairs):
        assert packs_of(pair) == [T0, T0 + MINUTE_MS, T0 + 2 * MINUTE_MS]
        assert rows_of(pair) == [T0 + s * 1000 for s in range(180, 190)]
        assert read(pair) == as_rows(seconds(0, 190, base=100.0 * (i + 1)))


def test_minute_bars_roll_up_from_packed_and_row_seconds_alike(pairs):
    pair, reference = pairs
    bars_write(pair=pair, granularity="second", bars=seconds(0, 130))
    for start in range(0, 130, 7):
        bars_write(pair=reference, granularity="second", bars=seconds(start, min(start + 7, 130)))
    bars_write(pair=pair, granularity="second", bars=seconds(130, 131))
    bars_write(pair=reference, granularity="second", bars=seconds(130, 131))

    def minutes(p):
        return as_rows(bars_range(pair=p, granularity="minute", from_ms=T0, to_ms=T0 + DAY_MS))

    assert packs_of(pair) == packs_of(reference) == [T0, T0 + MINUTE_MS]
    assert minutes(pair) == minutes(reference) and len(minutes(pair)) == 3


def test_a_second_written_into_a_packed_minute_replaces_the_packed_one(pairs):
    pair = pairs[0]
    bars_write(pair=pair, granularity="second", bars=seconds(0, 61))
    corrected = trade_bar(T0 + 10_000, [42.0, 43.0])
    bars_write(pair=pair, granularity="second", bars=[corrected])
    assert packs_of(pair) == [T0] and rows_of(pair) == [T0 + MINUTE_MS]  # packed again, no row left
    expected = seconds(0, 61)
    expected[10] = corrected
    assert read(pair) == as_rows(expected)
    minute = MinuteBar.objects.get(pair=pair, ts_ms=T0)
    assert minute.trade_count == sum(bar.trade_count for bar in expected[:60])
    assert minute.high == max(bar.high for bar in expected[:60] if bar.trade_count)


def test_a_second_added_to_a_packed_minute_is_packed_with_it(pairs):
    pair = pairs[0]
    sparse = [bar for bar in seconds(0, 61) if bar.ts_ms % 2000 == 0]
    bars_write(pair=pair, granularity="second", bars=sparse)
    assert packs_of(pair) == [T0]
    late = trade_bar(T0 + 13_000, [5.0])
    bars_write(pair=pair, granularity="second", bars=[late])
    assert packs_of(pair) == [T0] and rows_of(pair) == [T0 + MINUTE_MS]
    assert read(pair) == as_rows(sorted(sparse + [late], key=lambda bar: bar.ts_ms))


def test_every_reader_gives_across_the_tiers_what_it_gives_on_rows_alone(pairs, settings):
    """pair: written in ticks (minutes packed as they close); reference: the same seconds
    stored as rows only, as before packing existed."""
    from streaming.selectors import recent_bar_rows, replay_since

    pair, reference = pairs
    bars = seconds(0, 200)
    for start in range(0, 200, 9):
        bars_write(pair=pair, granularity="second", bars=bars[start:start + 9])
    SecondBar.objects.bulk_create([SecondBar(pair=reference, **{name: getattr(bar, name) for name in BAR_FIELDS})
                                   for bar in bars])
    assert packs_of(pair) == [T0, T0 + MINUTE_MS, T0 + 2 * MINUTE_MS] and packs_of(reference) == []
    for lo, hi in ((T0, T0 + DAY_MS), (T0 + 30_500, T0 + 150_000), (T0 + 59_000, T0 + 61_000),
                   (T0 + 120_000, T0 + 200_000), (T0 + 185_000, T0 + 190_000), (T0 + 70_000, T0 + 70_001)):
        assert read(pair, lo, hi) == read(reference, lo, hi)
        assert second_bars_count(pair_id=pair.pk, from_ms=lo, to_ms=hi) == len(read(reference, lo, hi))
        for metric in ("candlestick", "limit_orders", "trades", "spread"):  # the series' columns, hourly dates
            rows = {p: series_rows(pair=p, metric=metric, granularity="second", resolution="hourly", from_ms=lo,
                                   to_ms=hi) for p in (pair, reference)}
            assert rows[pair] == rows[reference], metric
    for after in (T0 - 1, T0 + 30_000, T0 + 59_000, T0 + 119_999, T0 + 190_000):
        for limit in (1, 7, 60, 61, 500):
            columns = ("ts_ms", "close", "bid_price", "trade_count")
            page = {p: bars_page(pair_id=p.pk, granularity="second", columns=columns, after_ms=after,
                                 to_ms=T0 + DAY_MS, limit=limit) for p in (pair, reference)}
            assert page[pair] == page[reference], (after, limit)
    def snapshot(p):  # less the base asset's supply, which differs between the two pairs
        return [{k: v for k, v in row.items() if k != "circulating_supply"} for row in recent_bar_rows(
            pair=p, metrics=["trade", "book", "quote"], granularity="second", from_ms=T0 + 50_000, to_ms=T0 + DAY_MS)]

    assert snapshot(pair) == snapshot(reference) and len(snapshot(pair)) == 150
    assert second_bar_last_ts(pair_id=pair.pk) == second_bar_last_ts(pair_id=reference.pk) == T0 + 199_000
    settings.SSE_REPLAY_MAX_SECONDS = 10 ** 9  # T0 is long ago
    assert replay_since(pair=pair, cursor=f"{T0 + 20_000}.0") == replay_since(pair=reference, cursor=f"{T0 + 20_000}.0")


def test_the_latest_second_is_found_when_every_minute_is_packed(pairs):
    pair = pairs[0]
    bars_write(pair=pair, granularity="second", bars=seconds(0, 61))
    SecondBar.objects.filter(pair=pair).delete()
    assert second_bar_last_ts(pair_id=pair.pk) == T0 + 59_000
    assert second_bar_last_ts(pair_id=pairs[1].pk) is None


def test_purging_removes_packed_seconds_past_retention(pairs, settings):
    settings.BAR_RETENTION_DAYS = {"second": 1, "minute": 0, "hour": 0, "day": 0}
    pair = pairs[0]
    bars_write(pair=pair, granularity="second", bars=seconds(0, 61))
    bars_write(pair=pair, granularity="second", bars=[trade_bar(T0 + 3 * DAY_MS, [1.0])])
    assert packs_of(pair) == [T0]
    removed = bars_purge(now_ms=T0 + 3 * DAY_MS + 1000)
    assert packs_of(pair) == [] and read(pair, T0, T0 + 4 * DAY_MS) == as_rows([trade_bar(T0 + 3 * DAY_MS, [1.0])])
    if connection.vendor != "postgresql":
        assert removed["second"] == 61  # bars, in SQLite


@pytest.mark.postgres
def test_packs_are_partitioned_by_day_and_retention_drops_their_partitions(pairs, settings):
    settings.BAR_RETENTION_DAYS = {"second": 7, "minute": 0, "hour": 0, "day": 0}
    now = clock.now_ms()
    old_day = now - 10 * DAY_MS - (now - 10 * DAY_MS) % DAY_MS
    pair = pairs[0]
    bars_write(pair=pair, granularity="second", bars=[trade_bar(old_day + s * 1000, [1.0 + s]) for s in range(61)])
    name = partition_name("market_secondbarpack", old_day, "day")
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM market_secondbarpack WHERE pair_id = %s", [pair.pk])
        assert cursor.fetchall() == [(name,)]
    bars_purge(now_ms=now)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [name])
        assert cursor.fetchone()[0] is None
    assert packs_of(pair) == [] and read(pair, old_day, old_day + DAY_MS) == []


def test_a_page_of_sparse_packed_minutes_still_holds_as_many_bars_as_asked(pairs):
    pair, reference = pairs
    bars = [trade_bar(T0 + minute * MINUTE_MS + 7000, [100.0 + minute]) for minute in range(150)]
    bars_write(pair=pair, granularity="second", bars=bars)  # one second a minute: 149 packs of one bar
    SecondBar.objects.bulk_create([SecondBar(pair=reference, **{name: getattr(bar, name) for name in BAR_FIELDS})
                                   for bar in bars])
    assert len(packs_of(pair)) == 149
    for after, limit in ((T0 - 1, 100), (T0 + 7000, 149), (T0 + 30 * MINUTE_MS, 1000), (T0 + 7000, 1)):
        page = {p: bars_page(pair_id=p.pk, granularity="second", columns=BAR_FIELDS, after_ms=after,
                             to_ms=T0 + DAY_MS, limit=limit) for p in (pair, reference)}
        assert page[pair] == page[reference] and page[pair], (after, limit)
