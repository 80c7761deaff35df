"""`manage.py history_synthesize`: a large synthetic history, here at a small size, in both
modes (PostgreSQL takes it by binary COPY, SQLite by plain inserts)."""

import math
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from market.bars import BAR_FIELDS, DAY_MS, HOUR_MS, MINUTE_MS, Bar, merge
from market.models import DayBar, HourBar, MinuteBar, Pair, SecondBar, SecondBarPack
from market.selectors import bars_range

pytestmark = pytest.mark.django_db

END_MS = 1_790_000_000_000 - 1_790_000_000_000 % HOUR_MS  # a whole hour


def synthesize(**options) -> str:
    out = StringIO()
    call_command("history_synthesize", stdout=out, end_ms=END_MS, **{
        "pairs": 1, "second_days": 1, "hour_days": 3, **options})
    return out.getvalue()


def stored(model, pair) -> list[Bar]:
    if model is SecondBar:  # both tiers
        return list(bars_range(pair=pair, granularity="second", from_ms=0, to_ms=END_MS + DAY_MS))
    return [Bar(*row) for row in model.objects.filter(pair=pair).order_by("ts_ms").values_list(*BAR_FIELDS)]


def same(a: Bar, b: Bar) -> bool:
    return all(x == y or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9))
               for x, y in ((getattr(a, f), getattr(b, f)) for f in BAR_FIELDS))


@pytest.fixture
def history():
    report = synthesize()
    pair = Pair.objects.select_related("exchange", "base", "quote").get(exchange__slug="synthetic")
    return pair, report


def test_it_creates_its_pairs_with_their_tick_and_step_and_reports_its_rate(history):
    pair, report = history
    assert pair.symbol == "SYN001-USDT" and pair.streamable
    assert pair.price_increment > 0 and pair.amount_increment > 0
    assert "86,400 second, 1,440 minute, 72 hour" in report and "bars/s" in report


def test_every_second_minute_and_hour_of_the_range_is_stored_once(history):
    pair, _ = history
    for model, step, first in ((SecondBar, 1000, END_MS - DAY_MS), (MinuteBar, MINUTE_MS, END_MS - DAY_MS),
                               (HourBar, HOUR_MS, END_MS - 3 * DAY_MS)):
        stamps = [bar.ts_ms for bar in stored(model, pair)]
        assert stamps == list(range(first, END_MS, step)), model.__name__


def test_its_second_bars_are_written_as_one_pack_per_minute(history):
    pair, _ = history
    assert not SecondBar.objects.filter(pair=pair).exists()
    packs = list(SecondBarPack.objects.filter(pair=pair).order_by("minute_ts_ms").values_list("minute_ts_ms", "seconds"))
    assert packs == [(minute, (1 << 60) - 1) for minute in range(END_MS - DAY_MS, END_MS, MINUTE_MS)]


def test_bars_keep_bar_s_rules_with_nulls_where_nothing_traded_or_quoted(history):
    pair, _ = history
    seconds = stored(SecondBar, pair)
    assert any(not bar.trade_count for bar in seconds) and any(bar.trade_count > 1 for bar in seconds)
    for bar in seconds + stored(HourBar, pair) + stored(DayBar, pair):
        if bar.trade_count:
            assert bar.low <= min(bar.open, bar.close) <= max(bar.open, bar.close) <= bar.high
            assert bar.low <= bar.price_mean <= bar.high and bar.low - 1e-9 <= bar.vwap <= bar.high + 1e-9
            assert math.isclose(bar.buy_volume + bar.sell_volume, bar.volume, abs_tol=1e-9)
            assert 0 <= bar.price_variance <= ((bar.high - bar.low) / 2) ** 2 + 1e-9
        else:
            assert bar.open is bar.close is None and bar.volume == bar.notional == 0
        if bar.quote_count:
            assert 0 < bar.bid_price < bar.ask_price
            assert bar.spread_bps_min <= bar.spread_bps_sum / bar.quote_count <= bar.spread_bps_max
        else:
            assert bar.bid_price is bar.spread_bps_min is None
        assert bar.bid_depth > 0 and bar.ask_depth > 0 and bar.bid_notional_sum > 0
    # the book is sampled once a second
    assert {bar.book_samples for bar in seconds} == {1}
    assert {bar.book_samples for bar in stored(HourBar, pair)} == {3600}


def test_coarser_bars_are_the_merge_of_the_finer_ones(history):
    pair, _ = history
    seconds, minutes, hours, days = (stored(m, pair) for m in (SecondBar, MinuteBar, HourBar, DayBar))
    assert same(minutes[7], merge(seconds[7 * 60:8 * 60], minutes[7].ts_ms))
    last_hour = hours[-1]
    assert same(last_hour, merge(seconds[-3600:], last_hour.ts_ms))
    for day in days:
        assert same(day, merge([h for h in hours if day.ts_ms <= h.ts_ms < day.ts_ms + DAY_MS], day.ts_ms))
    # the hours drawn before the seconds continue their walk
    assert abs(math.log(seconds[0].open / hours[-25].close)) < 0.05


def test_running_it_again_replaces_the_same_bars(history):
    pair, _ = history
    before = stored(HourBar, pair)
    synthesize()
    assert stored(HourBar, pair) == before and len(stored(SecondBar, pair)) == 86_400


def test_another_seed_gives_another_history(history):
    pair, _ = history
    before = stored(HourBar, pair)
    synthesize(seed=1)
    assert stored(HourBar, pair) != before


def test_the_series_endpoints_read_the_synthesised_history(history, client_for, api_key):
    pair, _ = history
    from datetime import datetime, timezone

    day = datetime.fromtimestamp((END_MS - DAY_MS) / 1000, tz=timezone.utc).date().isoformat()
    response = client_for(api_key.plaintext).post("/api/v1/market/candlestick", {
        "exchange": "synthetic", "symbol": "SYN001-USDT", "start": day, "end": day, "resolution": "hourly"},
        format="json")
    assert response.status_code == 200, response.content
    assert response.json()["meta"]["count"] == 24


def test_without_postgresql_it_refuses_more_than_a_small_history(settings):
    from django.db import connection

    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL takes any size")
    with pytest.raises(CommandError, match="2 pair-days"):
        synthesize(pairs=3)
