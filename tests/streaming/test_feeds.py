"""The buffer between a live feed and ingestion (streaming/feeds.py PairFeed): late events
are moved forward, never dropped; time is vouched for only while the feed is live; a lost
book is said at the point ingestion has reached; a checkpoint trims what it covers; an
event a read ahead passed keeps its time and makes ingestion read again."""

import random
from types import SimpleNamespace
from unittest import mock

import pytest

from market.sources.events import BookDelta, BookLost, BookSnapshot, PairRef, Trade
from streaming.feeds import PairFeed, ReadBehind

BTC = PairRef("binance", "BTC", "USDT")
T0 = 1_800_000_000_000


def status(state, reason=""):
    return SimpleNamespace(state=state, reason=reason, last_message_ms=None)


def fed(events, now):
    feed = PairFeed(BTC, lag_ms=1_000)
    with mock.patch("streaming.feeds._wall_ms", return_value=now):
        for event in events:
            feed.sink(event)
    return feed


def test_time_is_vouched_for_only_while_the_feed_is_live():
    feed = fed([Trade(T0 + 100, 10.0, 1.0, "buy", "1")], now=T0 + 150)
    feed.on_status(status("syncing"))
    assert feed.window_end(T0 + 5_000) is None  # nothing vouched before the book is synced
    with mock.patch("streaming.feeds._wall_ms", return_value=T0 + 300):
        feed.sink(BookSnapshot(T0 + 250, ((10.0, 1.0),), ((10.1, 1.0),)))
    feed.on_status(status("live"))
    assert feed.window_end(T0 + 5_000) == T0 + 5_000 - 50 - 1_000  # now, less the clock offset and the lag
    feed.on_status(status("reconnecting", "connection closed"))
    assert feed.window_end(T0 + 60_000) == T0 + 3_950  # frozen while not live


def test_a_lost_book_is_said_where_ingestion_had_got_to():
    feed = fed([BookSnapshot(T0, ((10.0, 1.0),), ((10.1, 1.0),))], now=T0 + 50)
    feed.on_status(status("live"))
    vouched = feed.window_end(T0 + 3_000)
    feed.events(T0, vouched - vouched % 1000)
    feed.on_status(status("reconnecting", "no message for 60 s"))
    lost = [e for e in feed.events(T0, T0 + 10_000) if type(e) is BookLost]
    assert lost == [BookLost(vouched, "no message for 60 s")]


def test_an_event_arriving_after_its_second_was_read_moves_to_the_next_one():
    feed = fed([BookSnapshot(T0, ((10.0, 1.0),), ((10.1, 1.0),))], now=T0 + 50)
    feed.on_status(status("live"))
    assert feed.events(T0, T0 + 1_000)[0].ts_ms == T0
    with mock.patch("streaming.feeds._wall_ms", return_value=T0 + 1_200):
        feed.sink(Trade(T0 + 900, 10.1, 0.5, "buy", "7"))  # late: second T0 was read
        feed.sink(BookDelta(T0 + 1_100, ((10.0, 0.5),), ()))
    late, delta = feed.events(T0 + 1_000, T0 + 2_000)
    assert late == Trade(T0 + 1_000, 10.1, 0.5, "buy", "7") and delta.ts_ms == T0 + 1_100
    assert feed.late_events == 1



def test_an_event_a_read_ahead_passed_keeps_its_time_and_the_next_read_after_it_reads_again():
    feed = fed([BookSnapshot(T0, ((10.0, 1.0),), ((10.1, 1.0),))], now=T0 + 50)
    feed.on_status(status("live"))
    assert len(feed.events(T0, T0 + 600, closing=False)) == 1  # ahead of the tick: nothing closed
    with mock.patch("streaming.feeds._wall_ms", return_value=T0 + 1_200):
        feed.sink(Trade(T0 + 400, 10.1, 0.5, "buy", "7"))  # after the read passed its time
    with pytest.raises(ReadBehind):
        feed.events(T0 + 600, T0 + 1_000)  # would skip it
    again = feed.events(T0, T0 + 1_000)  # read again from before it: at its own time
    assert [e.ts_ms for e in again] == [T0, T0 + 400]
    assert feed.late_events == 0 and feed.signals()["rereads"] == 1
    assert feed.events(T0 + 1_000, T0 + 2_000) == []  # and only once


def test_a_checkpoint_trims_the_buffer_and_moves_what_it_covers():
    feed = fed([BookSnapshot(T0, ((10.0, 1.0),), ((10.1, 1.0),)), Trade(T0 + 1_500, 10.1, 1.0, "buy", "1"),
                Trade(T0 + 2_500, 10.1, 1.0, "buy", "2")], now=T0 + 2_600)
    assert feed.covers(T0) and feed.covers_from_ms == T0
    feed.trim_before(T0 + 2_000)
    assert not feed.covers(T0 + 1_000) and feed.covers(T0 + 2_000)
    assert [e.trade_id for e in feed.events(0, T0 + 10_000)] == ["2"]


def test_windows_read_one_after_another_return_what_a_read_of_the_whole_buffer_returns():
    """A step scans only the buffer's last seconds; whatever the arrival order, re-reads from
    an earlier cursor and trims, each window is the whole buffer's events in it."""
    rng = random.Random(7)
    for _ in range(100):
        feed = PairFeed(PairRef("x", "A", "B"), lag_ms=1000)
        now = cursor = 10_000
        for _ in range(40):
            for _ in range(rng.randint(0, 20)):
                feed.sink(Trade(now + rng.randint(-1500, 1500), 1.0, 1.0, "buy", None))
            now += rng.randint(200, 1500)
            buffered = list(feed._events)
            start = cursor if rng.random() > 0.1 else max(10_000, cursor - rng.randint(0, 5000))
            end = cursor + rng.randint(0, 2000)
            expected = [item[2] for item in sorted((i for i in buffered if start <= i[0] < end),
                                                   key=lambda i: (i[0], i[1]))]
            assert feed.events(start, end) == expected
            cursor = max(cursor, end)
            if rng.random() < 0.05:
                feed.trim_before(cursor - 2000)
