"""Second bars roll up exactly into minute, hour and day bars in the store."""

import statistics

import pytest

from market.bars import DAY_MS, HOUR_MS, MINUTE_MS, Bar
from market.models import DayBar, HourBar, MinuteBar, SecondBar
from market.selectors import bars_range
from market.services import bars_purge, bars_write, catalog_seed_demo

T0 = 1_700_000_000_000 - 1_700_000_000_000 % DAY_MS  # a UTC midnight


def trade_bar(ts_ms, prices, qty=1.0, book=True):
    bar = Bar(ts_ms=ts_ms)
    for price in prices:
        bar.trade_count += 1
        if bar.trade_count == 1:
            bar.open = bar.high = bar.low = price
        bar.high, bar.low, bar.close = max(bar.high, price), min(bar.low, price), price
        bar.volume += qty
        bar.buy_volume += qty
        bar.notional += price * qty
        delta = price - bar.price_mean
        bar.price_mean += delta / bar.trade_count
        bar.price_m2 += delta * (price - bar.price_mean)
    if book:
        bar.book_samples, bar.bid_amount_sum, bar.ask_amount_sum = 1, 10.0, 5.0
    return bar


@pytest.fixture
def pair(db):
    return catalog_seed_demo()[0]


def test_writing_second_bars_rolls_up_minutes_hours_and_days(pair):
    prices = [[100 + i, 101 + i] for i in range(120)]
    bars_write(pair=pair, granularity="second", bars=[trade_bar(T0 + i * 1000, p) for i, p in enumerate(prices)])
    minutes = list(bars_range(pair=pair, granularity="minute", from_ms=T0, to_ms=T0 + HOUR_MS))
    assert [m.ts_ms for m in minutes] == [T0, T0 + MINUTE_MS]
    first = minutes[0]
    flat = [p for pair_prices in prices[:60] for p in pair_prices]
    assert (first.open, first.close, first.high, first.low) == (100, 160, 160, 100)
    assert first.trade_count == 120 and first.volume == 120
    assert first.price_variance == pytest.approx(statistics.pvariance(flat), rel=1e-9)
    hour = HourBar.objects.get(pair=pair, ts_ms=T0)
    day = DayBar.objects.get(pair=pair, ts_ms=T0)
    assert hour.trade_count == day.trade_count == 240
    assert day.book_samples == 120


def test_rewriting_a_second_does_not_double_count(pair):
    bars = [trade_bar(T0 + i * 1000, [100.0]) for i in range(10)]
    bars_write(pair=pair, granularity="second", bars=bars)
    bars_write(pair=pair, granularity="second", bars=bars[3:5])
    assert SecondBar.objects.filter(pair=pair).count() == 10
    assert MinuteBar.objects.get(pair=pair).trade_count == 10
    assert DayBar.objects.get(pair=pair).trade_count == 10


def test_hour_bars_written_directly_roll_up_into_days(pair):
    bars_write(pair=pair, granularity="hour", bars=[trade_bar(T0 + h * HOUR_MS, [50.0 + h]) for h in range(30)])
    days = list(bars_range(pair=pair, granularity="day", from_ms=T0, to_ms=T0 + 2 * DAY_MS))
    assert [d.trade_count for d in days] == [24, 6]
    assert days[0].open == 50 and days[0].close == 73 and days[1].open == 74


def test_purge_keeps_each_granularity_for_its_retention(pair, settings):
    settings.BAR_RETENTION_DAYS = {"second": 1, "minute": 0, "hour": 0, "day": 0}
    bars_write(pair=pair, granularity="second", bars=[trade_bar(T0, [1.0]), trade_bar(T0 + 2 * DAY_MS, [1.0])])
    deleted = bars_purge(now_ms=T0 + 2 * DAY_MS + 1000)
    assert deleted["second"] == 1
    assert list(SecondBar.objects.values_list("ts_ms", flat=True)) == [T0 + 2 * DAY_MS]
    assert MinuteBar.objects.filter(pair=pair).count() == 2
