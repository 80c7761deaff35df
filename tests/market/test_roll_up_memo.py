"""A tick's seconds folded into what the last write left in the open minute, hour and day
(RollUpMemo) give the same coarser bars, to the bit, as reading the children back."""

from unittest import mock

import pytest

from market import services
from market.bars import BAR_FIELDS, DAY_MS, Bar
from market.selectors import bars_range
from market.services import bars_write, bars_write_many, catalog_seed_demo

from .test_bar_store import T0, trade_bar

START = T0 + DAY_MS - 150_000  # 23:57:30: the writes cross minutes, an hour and a day


@pytest.fixture
def pairs(db):
    return catalog_seed_demo()[:3]


def second(s: int) -> Bar:
    """Prices and sizes whose sums round differently in another order; some seconds idle."""
    bar = trade_bar(START + s * 1000, [100 + s / 3, 100 + s / 7][: s % 3], qty=0.1 + s / 7, book=bool(s % 4))
    if s % 2:
        bar.quote_count, bar.bid_price, bar.ask_price = 3, 99.9 + s / 11, 100.1 + s / 13
        bar.spread_bps_sum, bar.spread_bps_min, bar.spread_bps_max = 1.0 + s / 17, 0.1 + s / 19, 2.0 + s / 23
    return bar


def stored(pair, granularity) -> list[tuple]:
    bars = bars_range(pair=pair, granularity=granularity, from_ms=T0, to_ms=T0 + 3 * DAY_MS)
    return [tuple(getattr(bar, name) for name in BAR_FIELDS) for bar in bars]


def test_folded_roll_ups_equal_the_read_ones_across_minutes_an_hour_and_a_day(pairs):
    folded, read, whole = pairs
    sizes = [1, 2, 1, 3, 1, 1, 4, 2]  # seconds per tick, in turn
    memos, s, ticks = {}, 0, 0
    with mock.patch.object(services, "_roll_up", wraps=services._roll_up) as reads:
        while s < 200:
            bars = [second(i) for i in range(s, min(s + sizes[ticks % len(sizes)], 200))]
            memos = bars_write_many(granularity="second", bars_by_pair=[(folded, bars)],
                                    memos={folded.pk: memos.get(folded.pk)})
            s, ticks = s + len(bars), ticks + 1
        folded_reads = reads.call_count
        for i in range(0, 200, 3):
            bars_write_many(granularity="second", bars_by_pair=[(read, [second(j) for j in range(i, min(i + 3, 200))])])
    bars_write(pair=whole, granularity="second", bars=[second(i) for i in range(200)])

    for granularity in ("second", "minute", "hour", "day"):
        assert stored(folded, granularity) == stored(read, granularity) == stored(whole, granularity), granularity
    assert len(stored(folded, "day")) == 2 and len(stored(folded, "hour")) == 2
    # read back only on the first tick and on those that reached a new minute (3 roll-ups each)
    assert folded_reads <= 3 * (1 + 5) < 3 * ticks


def test_a_memo_the_bars_do_not_continue_is_not_used(pairs):
    pair = pairs[0]
    memos = bars_write_many(granularity="second", bars_by_pair=[(pair, [second(0), second(1)])], memos={pair.pk: None})
    assert memos[pair.pk].through_ms == START + 2000
    bars_write_many(granularity="second", bars_by_pair=[(pair, [second(1)])])  # written again, elsewhere
    with mock.patch.object(services, "_roll_up", wraps=services._roll_up) as reads:
        bars_write_many(granularity="second", bars_by_pair=[(pair, [second(3)])], memos=memos)  # skips second 2
    assert reads.call_count == 3
    reference = pairs[1]
    bars_write(pair=reference, granularity="second", bars=[second(0), second(1), second(3)])
    assert stored(pair, "minute") == stored(reference, "minute")
