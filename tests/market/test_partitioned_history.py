"""History partitioned by time (PostgreSQL): writes make the partitions they need, retention
drops whole partitions and deletes no row, and the answers inside retention do not change.
The multi-pair write stores what per-pair writes store."""

import pytest
from django.db import connection

from config import clock
from market.bars import BAR_FIELDS, DAY_MS, HOUR_MS
from market.models import BAR_MODELS, DayBar, HourBar, MinuteBar, SecondBar, SecondBarPack
from market.partitions import partition_name, span_bounds
from market.selectors import bars_range
from market.services import bars_purge, bars_write, bars_write_many, catalog_seed_demo
from schemes.models import SchemeEvent
from schemes.selectors import scheme_events_since, scheme_history
from schemes.services import scheme_events_purge, scheme_events_store

from .test_bar_store import trade_bar

HOUR = HOUR_MS


@pytest.fixture
def pairs(db):
    return catalog_seed_demo()[:3]


def partitions(model) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = %s::regclass ORDER BY 1", [model._meta.db_table])
        return [name for (name,) in cursor.fetchall()]


def rows_deleted_in_this_transaction() -> dict[str, int]:
    """Rows deleted so far in this transaction, by bar or scheme-event partition."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, n_tup_del FROM pg_stat_xact_user_tables "
                       "WHERE relname ~ '^(market_(second|minute|hour|day)bar(pack)?|schemes_schemeevent)_p'")
        return dict(cursor.fetchall())


def detection(ts_ms, side="bid"):
    return {"scheme": "layering", "side": side, "direction": "up" if side == "bid" else "down", "ts_ms": ts_ms,
            "price": 100.0, "confidence": 0.8, "alert_score": 55.0, "build": {"start_ms": ts_ms - 5000, "levels": 3},
            "collapse": {"end_ms": ts_ms - 100, "cancel_ratio": 0.9}}


def answers(pair, now):
    """What the selectors serve for the pair: a day of seconds and minutes at each age, the
    hours and days of the last 40 days, the scheme history of the last 31 days and the
    SSE resume list."""
    out = {}
    for age in (1, 3, 9, 12):
        day = now - age * DAY_MS
        for granularity in ("second", "minute"):
            out[granularity, age] = [tuple(getattr(b, f) for f in BAR_FIELDS)
                                     for b in bars_range(pair=pair, granularity=granularity, from_ms=day - DAY_MS,
                                                         to_ms=day + DAY_MS)]
    for granularity in ("hour", "day"):
        out[granularity] = [tuple(getattr(b, f) for f in BAR_FIELDS)
                            for b in bars_range(pair=pair, granularity=granularity, from_ms=now - 40 * DAY_MS,
                                                to_ms=now + DAY_MS)]
    out["schemes"] = scheme_history(pair=pair, start_ms=now - 31 * 24 * HOUR, end_ms=now, limit=1000)
    out["resume"] = scheme_events_since(pair=pair, after_id=0, since_ms=now - 31 * 24 * HOUR)
    return out


@pytest.mark.postgres
def test_retention_drops_whole_old_partitions_and_keeps_every_answer_inside_it(pairs, settings):
    settings.BAR_RETENTION_DAYS = {"second": 7, "minute": 10, "hour": 0, "day": 0}
    settings.SCHEMES_RETENTION_HOURS = 720
    now = clock.now_ms()
    pair = pairs[0]
    for age in (1, 3, 9, 12):  # days ago: inside and outside each retention
        start = now - age * DAY_MS - (now - age * DAY_MS) % HOUR_MS
        bars_write_many(granularity="second", bars_by_pair=[
            (p, [trade_bar(start + i * 1000, [100.0 + age + i]) for i in range(90)]) for p in pairs])
    scheme_events_store(pair=pair, detections=[detection(now - 2 * 24 * HOUR), detection(now - 700 * HOUR),
                                               detection(now - 760 * HOUR), detection(now - 800 * HOUR, "ask")])
    before = answers(pair, now)
    second_partitions, minute_partitions = partitions(SecondBar), partitions(MinuteBar)
    pack_partitions = partitions(SecondBarPack)
    scheme_partitions = partitions(SchemeEvent)

    deleted_before = rows_deleted_in_this_transaction()  # rows of minutes packed by the writes
    bars_purge(now_ms=now)
    scheme_events_purge(now_ms=now)

    after = answers(pair, now)
    # no row deleted by the purge (in the partitions kept; the dropped ones' counts went with them)
    deleted_after = rows_deleted_in_this_transaction()
    assert deleted_after == {name: n for name, n in deleted_before.items() if name in deleted_after}
    # inside retention: the same answers; outside: nothing
    for age in (1, 3):
        assert after["second", age] == before["second", age] and len(after["second", age]) == 90
    for age in (9, 12):
        assert before["second", age] and after["second", age] == []
    assert after["minute", 9] == before["minute", 9] and after["minute", 12] == [] and before["minute", 12]
    assert after["hour"] == before["hour"] and after["day"] == before["day"]  # kept forever
    assert [e["ts_ms"] for e in after["schemes"]] == [now - 2 * 24 * HOUR, now - 700 * HOUR]
    assert after["schemes"] == before["schemes"][:2]
    kept = {e["id"] for e in after["schemes"]}
    assert after["resume"] == [(bar, e) for bar, e in before["resume"] if e["id"] in kept] and len(kept) == 2
    # the old days' partitions are gone, whole; the others stay
    def days(model, *ages_hours):
        return {partition_name(model._meta.db_table, span_bounds(now - h * HOUR, "day")[0], "day") for h in ages_hours}

    assert set(second_partitions) - set(partitions(SecondBar)) >= days(SecondBar, 9 * 24, 12 * 24)
    assert set(partitions(SecondBar)) >= days(SecondBar, 0, 24, 3 * 24)
    assert set(pack_partitions) - set(partitions(SecondBarPack)) == days(SecondBarPack, 9 * 24, 12 * 24)
    assert set(partitions(SecondBarPack)) >= days(SecondBarPack, 24, 3 * 24)  # each day's first minute packed
    assert set(minute_partitions) - set(partitions(MinuteBar)) >= days(MinuteBar, 12 * 24)
    assert set(partitions(MinuteBar)) >= days(MinuteBar, 0, 24, 3 * 24, 9 * 24)
    assert set(scheme_partitions) - set(partitions(SchemeEvent)) >= days(SchemeEvent, 760, 800)
    assert set(partitions(SchemeEvent)) >= days(SchemeEvent, 2 * 24, 700)


@pytest.mark.postgres
def test_a_write_makes_the_partition_it_needs_however_far_back(pairs):
    pair, long_ago = pairs[0], 1_300_000_000_000 - 1_300_000_000_000 % DAY_MS  # a midnight in March 2011
    bars_write(pair=pair, granularity="hour", bars=[trade_bar(long_ago + h * HOUR, [10.0 + h]) for h in range(48)])
    assert HourBar.objects.filter(pair=pair).count() == 48
    assert DayBar.objects.filter(pair=pair).count() == 2
    assert "market_hourbar_p201103" in partitions(HourBar) and "market_daybar_p2011" in partitions(DayBar)
    scheme_events_store(pair=pair, detections=[detection(long_ago)])
    assert SchemeEvent.objects.filter(pair=pair).count() == 1


def stored(pair):
    return {granularity: list(model.objects.filter(pair=pair).order_by("ts_ms").values_list(*BAR_FIELDS))
            for granularity, model in BAR_MODELS.items()}


def test_writing_many_pairs_together_stores_what_writing_each_stores(db):
    from market.models import Exchange, Pair
    from market.services import asset_ensure

    quote = asset_ensure("USDT")
    one = Exchange.objects.create(slug="one", name="One")
    many = Exchange.objects.create(slug="many", name="Many")
    bases = [asset_ensure(f"T{i}") for i in range(5)]
    apart = [Pair.objects.create(exchange=one, base=base, quote=quote) for base in bases]
    together = [Pair.objects.create(exchange=many, base=base, quote=quote) for base in bases]
    start = 1_700_000_000_000 - 1_700_000_000_000 % DAY_MS + DAY_MS - 90_000  # the last 90 s of a day
    for tick in range(0, 120, 30):  # four ticks of 30 s, across a minute, an hour and a day
        batches = [[trade_bar(start + (tick + s) * 1000, [100.0 + i + s / 7, 99.0 + i])
                    for s in range(30) if (s + tick) % (i + 2)] for i in range(5)]
        for pair, bars in zip(apart, batches):
            bars_write(pair=pair, granularity="second", bars=bars)
        bars_write_many(granularity="second", bars_by_pair=list(zip(together, batches)))
    again = [[trade_bar(start + 31_000, [7.0])], [], [trade_bar(start + 95_000, [8.0, 9.0])], [], []]
    for pair, bars in zip(apart, again):  # a second written twice, and pairs with no bar in the tick
        bars_write(pair=pair, granularity="second", bars=bars)
    bars_write_many(granularity="second", bars_by_pair=list(zip(together, again)))
    for a, b in zip(apart, together):
        assert stored(a) == stored(b)
        assert len(stored(a)["day"]) == 2


@pytest.mark.postgres
def test_upkeep_makes_today_and_the_next_three_days(db):
    from market.services import bar_partitions_upkeep
    from schemes.services import scheme_event_partitions_upkeep

    later = clock.now_ms() + 40 * DAY_MS  # days no write has made yet
    bar_partitions_upkeep(now_ms=later)
    scheme_event_partitions_upkeep(now_ms=later)
    for model in (SecondBar, MinuteBar, SchemeEvent):
        table = model._meta.db_table
        assert {partition_name(table, span_bounds(later + d * DAY_MS, "day")[0], "day") for d in range(4)} \
            <= set(partitions(model))
    assert partition_name("market_hourbar", span_bounds(later, "month")[0], "month") in partitions(HourBar)


@pytest.mark.postgres
def test_a_partition_made_in_a_rolled_back_write_is_made_again(pairs):
    from django.db import transaction

    pair, day = pairs[0], clock.now_ms() + 60 * DAY_MS
    with pytest.raises(RuntimeError), transaction.atomic():
        bars_write(pair=pair, granularity="second", bars=[trade_bar(day, [1.0])])
        raise RuntimeError("the step failed")
    bars_write(pair=pair, granularity="second", bars=[trade_bar(day, [2.0])])
    assert list(SecondBar.objects.filter(pair=pair).values_list("close", flat=True)) == [2.0]


@pytest.mark.postgres
def test_a_purge_drops_the_tables_an_interrupted_one_left_detached(pairs, settings):
    settings.BAR_RETENTION_DAYS = {"second": 7, "minute": 0, "hour": 0, "day": 0}
    now = clock.now_ms()
    old_day = span_bounds(now - 20 * DAY_MS, "day")[0]
    bars_write(pair=pairs[0], granularity="second", bars=[trade_bar(old_day, [1.0])])
    name = partition_name("market_secondbar", old_day, "day")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ALTER TABLE market_secondbar DETACH PARTITION {name}")  # as a purge stopped midway
    bars_purge(now_ms=now)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [name])
        assert cursor.fetchone()[0] is None
