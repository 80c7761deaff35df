"""BarBuilder: events in, complete 1-second bars out (plain Python, no Django)."""

import math
import random
import statistics

import pytest

from market.bars import Bar, merge
from market.sources.bar_builder import BarBuilder, build_bars
from market.sources.events import BookDelta, BookSnapshot, PairRef, Quote, Trade
from market.sources.simulator import SimulatorSource

PAIR = PairRef("binance", "BTC", "USDT")
T0 = 1_700_000_040_000  # a minute boundary


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def snapshot(ts, bids, asks):
    return BookSnapshot(ts, tuple(bids), tuple(asks))


def test_trades_fill_open_high_low_close_and_volumes_by_taker_side():
    b = BarBuilder(PAIR)
    b.feed_many([
        Trade(T0 + 10, 100.0, 1.0, "buy"),
        Trade(T0 + 20, 102.0, 2.0, "sell"),
        Trade(T0 + 30, 99.0, 0.5, "buy"),
        Trade(T0 + 40, 101.0, 1.5, "sell"),
    ])
    (bar,) = b.flush(T0 + 1000)
    assert bar.ts_ms == T0
    assert (bar.trade_count, bar.open, bar.high, bar.low, bar.close) == (4, 100.0, 102.0, 99.0, 101.0)
    assert bar.volume == 5.0
    assert (bar.buy_volume, bar.sell_volume) == (1.5, 3.5)
    assert bar.notional == pytest.approx(100 + 204 + 49.5 + 151.5)
    assert bar.vwap == pytest.approx(505.0 / 5.0)


def test_price_variance_equals_statistics_pvariance_of_the_trade_prices():
    rng = random.Random(7)
    prices = [43_000 + rng.gauss(0, 25) for _ in range(5000)]
    b = BarBuilder(PAIR)
    b.feed_many(Trade(T0 + i // 10, p, 0.01, "buy") for i, p in enumerate(prices))
    (bar,) = b.flush(T0 + 1000)
    assert bar.trade_count == len(prices)
    assert rel(bar.price_mean, statistics.fmean(prices)) < 1e-12
    assert rel(bar.price_variance, statistics.pvariance(prices)) < 1e-9


def _minute_of_events(seed=3):
    """A minute of trades, book deltas and quotes; quantities are multiples of 1/1024 so
    sums are exact in any order."""
    rng = random.Random(seed)
    events = [snapshot(T0, [(100.0 - i * 0.1, 1.0 + i) for i in range(20)],
                       [(100.1 + i * 0.1, 2.0 + i) for i in range(20)])]
    ts = T0
    bid, ask = 100.0, 100.1
    while ts < T0 + 60_000:
        ts += rng.randint(1, 400)
        if ts >= T0 + 60_000:
            break
        kind = rng.random()
        if kind < 0.4:
            events.append(Trade(ts, round(100 + rng.gauss(0, 0.3), 2), rng.randint(1, 4000) / 1024,
                                rng.choice(["buy", "sell"])))
        elif kind < 0.8:
            events.append(BookDelta(ts, ((round(bid - rng.randint(0, 15) * 0.1, 1), rng.randint(0, 50) / 8),),
                                    ((round(ask + rng.randint(0, 15) * 0.1, 1), rng.randint(0, 50) / 8),)))
        else:
            bid = round(100 + rng.gauss(0, 0.2), 2)
            events.append(Quote(ts, bid, 1.0, round(bid + rng.randint(1, 5) * 0.01, 2), 2.0))
    return events


def test_merge_of_sixty_second_bars_equals_the_minute_bar_built_directly():
    events = _minute_of_events()
    seconds = build_bars(events, PAIR, T0, T0 + 60_000)
    (minute,) = build_bars(events, PAIR, T0, T0 + 60_000, interval_ms=60_000)
    assert len(seconds) == 60
    merged = merge(seconds, T0)
    for name in ("ts_ms", "trade_count", "open", "high", "low", "close", "volume", "buy_volume", "sell_volume",
                 "book_samples", "bid_orders_sum", "ask_orders_sum", "quote_count", "bid_price", "ask_price",
                 "spread_bps_min", "spread_bps_max"):
        assert getattr(merged, name) == getattr(minute, name), name
    for name in ("price_mean", "price_m2", "notional", "bid_amount_sum", "ask_amount_sum", "bid_notional_sum",
                 "ask_notional_sum", "spread_bps_sum"):
        assert rel(getattr(merged, name), getattr(minute, name)) < 1e-9, name
    assert minute.book_samples == 60


def test_merged_second_bars_match_direct_minute_bars_on_simulator_output():
    sim = SimulatorSource(seed=11)
    pair = PairRef("binance", "ETH", "USDT")
    events = list(sim.events(pair, T0, T0 + 180_000))
    seconds = build_bars(events, pair, T0, T0 + 180_000)
    minutes = build_bars(events, pair, T0, T0 + 180_000, interval_ms=60_000)
    assert len(seconds) == 180 and len(minutes) == 3
    for i, minute in enumerate(minutes):
        merged = merge(seconds[i * 60:(i + 1) * 60], minute.ts_ms)
        assert (merged.trade_count, merged.open, merged.high, merged.low, merged.close) == (
            minute.trade_count, minute.open, minute.high, minute.low, minute.close)
        assert rel(merged.volume, minute.volume) < 1e-12
        assert rel(merged.price_mean, minute.price_mean) < 1e-9
        assert rel(merged.price_m2, minute.price_m2) < 1e-9
        assert merged.quote_count == minute.quote_count
        assert rel(merged.bid_amount_sum, minute.bid_amount_sum) < 1e-9


def test_book_depth_counts_only_levels_within_one_percent_of_mid():
    b = BarBuilder(PAIR)
    b.feed(snapshot(T0, [(99.9, 2.0), (99.5, 3.0), (99.05, 1.0), (98.95, 50.0)],
                    [(100.1, 1.0), (100.9, 4.0), (101.05, 60.0)]))
    (bar,) = b.flush(T0 + 1000)  # mid 100: band [99, 101]
    assert bar.book_samples == 1
    assert bar.bid_amount_sum == pytest.approx(6.0)
    assert bar.bid_notional_sum == pytest.approx(99.9 * 2 + 99.5 * 3 + 99.05)
    assert bar.bid_orders_sum == 3
    assert bar.ask_amount_sum == pytest.approx(5.0)
    assert bar.ask_notional_sum == pytest.approx(100.1 + 100.9 * 4)
    assert bar.ask_orders_sum == 2
    assert bar.imbalance == pytest.approx((6 - 5) / 11)


def test_depth_band_is_configurable():
    b = BarBuilder(PAIR, depth_band=0.02)
    b.feed(snapshot(T0, [(99.9, 2.0), (98.95, 50.0)], [(100.1, 1.0), (101.05, 60.0)]))
    (bar,) = b.flush(T0 + 1000)
    assert (bar.bid_orders_sum, bar.ask_orders_sum) == (2, 2)


def test_book_is_sampled_once_at_the_end_of_each_second():
    b = BarBuilder(PAIR)
    b.feed(snapshot(T0, [(99.9, 2.0)], [(100.1, 1.0)]))
    b.feed(BookDelta(T0 + 500, bids=((99.8, 5.0),)))
    b.feed(BookDelta(T0 + 900, bids=((99.9, 0.0),), asks=((100.2, 3.0),)))
    b.feed(BookDelta(T0 + 1500, asks=((100.1, 0.0),)))
    first, second = b.flush(T0 + 2000)
    # end of second 0: bids {99.8: 5}, asks {100.1: 1, 100.2: 3}
    assert (first.bid_amount_sum, first.ask_amount_sum, first.bid_orders_sum, first.ask_orders_sum) == (5.0, 4.0, 1, 2)
    assert (second.bid_amount_sum, second.ask_amount_sum) == (5.0, 3.0)
    assert b.book() == ([(99.8, 5.0)], [(100.2, 3.0)])


def test_spread_statistics_come_from_quote_updates():
    b = BarBuilder(PAIR)
    b.feed(Quote(T0 + 1, 100.0, 1.0, 100.1, 1.0))
    b.feed(Quote(T0 + 2, 100.0, 1.0, 100.2, 1.0))
    b.feed(Quote(T0 + 3, 99.95, 1.0, 100.05, 1.0))
    (bar,) = b.flush(T0 + 1000)
    spreads = [0.1 / 100.05 * 1e4, 0.2 / 100.1 * 1e4, 0.1 / 100.0 * 1e4]
    assert bar.quote_count == 3
    assert bar.spread_bps_sum == pytest.approx(sum(spreads))
    assert bar.spread_bps_min == pytest.approx(min(spreads))
    assert bar.spread_bps_max == pytest.approx(max(spreads))
    assert (bar.bid_price, bar.ask_price) == (99.95, 100.05)
    assert bar.spread_bps == pytest.approx(0.1 / 100.0 * 1e4)


def test_quotes_are_derived_from_the_book_when_the_source_sends_none():
    b = BarBuilder(PAIR)
    b.feed(snapshot(T0, [(99.9, 2.0), (99.8, 1.0)], [(100.1, 1.0)]))  # top: 99.9 / 100.1
    b.feed(BookDelta(T0 + 10, bids=((99.7, 4.0),)))  # below the top: no quote
    b.feed(BookDelta(T0 + 20, bids=((99.9, 3.0),)))  # top quantity changed: a quote
    b.feed(BookDelta(T0 + 30, asks=((100.0, 1.0),)))  # new best ask: a quote
    (bar,) = b.flush(T0 + 1000)
    assert bar.quote_count == 3
    assert (bar.bid_price, bar.ask_price) == (99.9, 100.0)
    assert bar.spread_bps_min == pytest.approx(0.1 / 99.95 * 1e4)
    assert bar.spread_bps_max == pytest.approx(0.2 / 100.0 * 1e4)


def test_a_second_with_quote_events_ignores_the_book_derived_quotes():
    b = BarBuilder(PAIR)
    b.feed(snapshot(T0, [(99.9, 2.0)], [(100.1, 1.0)]))
    b.feed(Quote(T0, 99.9, 2.0, 100.1, 1.0))
    b.feed(BookDelta(T0 + 5, asks=((100.0, 1.0),)))
    b.feed(Quote(T0 + 5, 99.9, 2.0, 100.0, 1.0))
    (bar,) = b.flush(T0 + 1000)
    assert bar.quote_count == 2


def test_a_bar_is_emitted_for_every_second_even_without_events():
    b = BarBuilder(PAIR)
    b.feed(snapshot(T0 + 100, [(99.9, 2.0)], [(100.1, 1.0)]))
    b.feed(Trade(T0 + 200, 100.0, 1.0, "buy"))
    b.feed(Trade(T0 + 5300, 100.1, 1.0, "sell"))
    bars = b.flush(T0 + 7000)
    assert [bar.ts_ms for bar in bars] == [T0 + i * 1000 for i in range(7)]
    quiet = bars[1:5] + [bars[6]]
    assert all(bar.trade_count == 0 and bar.open is None and bar.close is None for bar in quiet)
    assert all(bar.book_samples == 1 and bar.bid_amount_sum == 2.0 for bar in bars)
    # the quote state is carried over seconds without quote updates
    assert all(bar.quote_count == 0 and (bar.bid_price, bar.ask_price) == (99.9, 100.1) for bar in quiet)
    assert bars[5].trade_count == 1


def test_seconds_before_any_book_event_carry_no_book_sample():
    b = BarBuilder(PAIR)
    b.feed(Trade(T0, 100.0, 1.0, "buy"))
    b.feed(snapshot(T0 + 1500, [(99.9, 2.0)], [(100.1, 1.0)]))
    first, second = b.flush(T0 + 2000)
    assert first.book_samples == 0 and first.bid_depth is None
    assert second.book_samples == 1


def test_flush_closes_only_complete_seconds_and_later_events_continue():
    b = BarBuilder(PAIR)
    b.feed(Trade(T0 + 100, 100.0, 1.0, "buy"))
    bars = b.flush(T0 + 2500)
    assert [bar.ts_ms for bar in bars] == [T0, T0 + 1000]
    assert b.open_second_ms == T0 + 2000
    b.feed(Trade(T0 + 2600, 101.0, 1.0, "buy"))
    (bar,) = b.flush(T0 + 3000)
    assert bar.ts_ms == T0 + 2000 and bar.trade_count == 1
    assert b.flush(T0 + 3000) == []


def test_an_event_before_the_open_second_is_rejected():
    b = BarBuilder(PAIR)
    b.feed(Trade(T0 + 100, 100.0, 1.0, "buy"))
    b.flush(T0 + 2000)
    with pytest.raises(ValueError, match="time order"):
        b.feed(Trade(T0 + 1500, 100.0, 1.0, "buy"))


def test_start_ms_starts_bars_there_and_earlier_events_only_warm_the_book():
    b = BarBuilder(PAIR, start_ms=T0 + 2000)
    b.feed(snapshot(T0, [(99.9, 2.0)], [(100.1, 1.0)]))
    b.feed(Trade(T0 + 500, 100.1, 1.0, "buy"))  # before start: not counted
    b.feed(BookDelta(T0 + 800, bids=((99.95, 1.0),)))
    bars = b.flush(T0 + 4000)
    assert [bar.ts_ms for bar in bars] == [T0 + 2000, T0 + 3000]
    assert all(bar.trade_count == 0 and bar.quote_count == 0 for bar in bars)
    assert bars[0].bid_amount_sum == 3.0
    assert (bars[0].bid_price, bars[0].ask_price) == (99.95, 100.1)


def test_start_ms_without_events_still_yields_continuous_empty_bars():
    bars = BarBuilder(PAIR, start_ms=T0).flush(T0 + 3000)
    assert [bar.ts_ms for bar in bars] == [T0, T0 + 1000, T0 + 2000]
    assert all(bar == Bar(ts_ms=bar.ts_ms) for bar in bars)


def test_feeding_in_chunks_with_flushes_gives_the_same_bars_as_one_pass():
    sim = SimulatorSource(seed=2)
    pair = PairRef("binance", "SOL", "USDT")
    end = T0 + 150_000
    events = list(sim.events(pair, T0, end))
    whole = build_bars(events, pair, T0, end)
    b = BarBuilder(pair, start_ms=T0)
    chunked = []
    for cut in range(T0, end, 7_300):
        b.feed_many(e for e in events if cut <= e.ts_ms < min(end, cut + 7_300))
        chunked += b.flush(min(end, cut + 7_300))
    assert chunked == whole


def test_restarting_from_a_minute_boundary_reproduces_the_bars():
    sim = SimulatorSource(seed=4)
    pair = PairRef("binance", "BTC", "USDT")
    whole = build_bars(sim.events(pair, T0, T0 + 180_000), pair, T0, T0 + 180_000)
    # restart at T0 + 75 s: warm up from the snapshot at T0 + 60 s
    resumed = build_bars(sim.events(pair, T0 + 60_000, T0 + 180_000), pair, T0 + 75_000, T0 + 180_000)
    assert resumed == whole[75:]


def test_interval_must_be_whole_seconds():
    with pytest.raises(ValueError):
        BarBuilder(PAIR, interval_ms=1500)


def test_crossed_or_one_sided_books_do_not_break_sampling():
    b = BarBuilder(PAIR)
    b.feed(snapshot(T0, [(100.0, 1.0)], []))
    b.feed(Quote(T0 + 1, 99.0, 1.0, 101.0, 1.0))
    (bar,) = b.flush(T0 + 1000)
    assert bar.book_samples == 1 and bar.bid_amount_sum == 1.0 and bar.ask_amount_sum == 0.0
    assert math.isfinite(bar.bid_notional_sum)


# -- checkpoints and a lost book -----------------------------------------------------------

def _book_events(t0):
    from market.sources.events import BookDelta, BookSnapshot, Quote, Trade

    return [
        BookSnapshot(t0, ((100.0, 1.0), (99.5, 2.0)), ((100.5, 1.5), (101.0, 3.0))),
        Trade(t0 + 200, 100.5, 0.5, "buy", "1"),
        BookDelta(t0 + 200, (), ((100.5, 1.0),)),
        BookDelta(t0 + 1_300, ((100.2, 0.7),), ()),
        Quote(t0 + 1_400, 100.2, 0.7, 100.5, 1.0),
        Trade(t0 + 2_100, 100.2, 0.7, "sell", "2"),
        BookDelta(t0 + 2_100, ((100.2, 0.0),), ()),
        BookDelta(t0 + 3_500, ((99.0, 4.0),), ((102.0, 1.0),)),
        Trade(t0 + 4_200, 100.0, 0.1, "sell", "3"),
    ]


def test_a_builder_restored_from_its_state_makes_the_same_bars():
    from market.sources.bar_builder import BarBuilder
    from market.sources.events import PairRef

    ref = PairRef("binance", "BTC", "USDT")
    t0 = 1_700_000_000_000
    events = _book_events(t0)
    whole = BarBuilder(ref, start_ms=t0)
    whole.feed_many(events)
    expected = whole.flush(t0 + 5_000)
    for cut in (t0 + 1_000, t0 + 2_000, t0 + 3_000, t0 + 4_000):
        first = BarBuilder(ref, start_ms=t0)
        first.feed_many(e for e in events if e.ts_ms < cut)
        bars = first.flush(cut)
        resumed = BarBuilder.restore(ref, first.state())
        resumed.feed_many(e for e in events if e.ts_ms >= cut)
        bars += resumed.flush(t0 + 5_000)
        assert bars == expected, cut
        assert resumed.book() == whole.book()


def test_after_a_lost_book_seconds_have_no_book_sample_until_the_next_snapshot():
    from market.sources.bar_builder import BarBuilder
    from market.sources.events import BookLost, BookSnapshot, PairRef, Trade

    ref = PairRef("binance", "BTC", "USDT")
    t0 = 1_700_000_000_000
    builder = BarBuilder(ref, start_ms=t0)
    builder.feed_many([
        BookSnapshot(t0, ((100.0, 1.0),), ((100.5, 1.0),)),
        BookLost(t0 + 1_500, "connection lost"),
        Trade(t0 + 2_500, 100.4, 0.2, "buy", "9"),
        BookSnapshot(t0 + 3_200, ((100.1, 2.0),), ((100.6, 1.0),)),
    ])
    bars = builder.flush(t0 + 5_000)
    assert [b.book_samples for b in bars] == [1, 0, 0, 1, 1]
    assert bars[2].trade_count == 1  # trades heard while the book is unknown still count
    assert bars[1].bid_price is None and bars[3].bid_price == 100.1


def test_a_second_that_loses_and_regains_its_book_closes_on_the_new_book_s_quote():
    from market.sources.bar_builder import BarBuilder
    from market.sources.events import BookLost, BookSnapshot, PairRef, Quote

    ref = PairRef("binance", "BTC", "USDT")
    t0 = 1_700_000_000_000
    builder = BarBuilder(ref, start_ms=t0)
    builder.feed_many([
        BookSnapshot(t0, ((100.0, 1.0),), ((100.5, 1.0),)),
        Quote(t0 + 100, 100.0, 1.0, 100.5, 1.0),
        BookLost(t0 + 400, "connection lost"),
        BookSnapshot(t0 + 700, ((99.0, 2.0),), ((99.5, 1.0),)),
    ])
    (bar,) = builder.flush(t0 + 1_000)
    assert (bar.bid_price, bar.ask_price) == (99.0, 99.5) and bar.book_samples == 1
