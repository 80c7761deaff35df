"""A per-event depth feed netted into batches the way exchanges publish depth."""

from market.sources.events import BookDelta, BookSnapshot, PairRef, Trade
from market.sources.netting import net_depth
from market.sources.order_book import levels_apply
from market.sources.simulator import SimulatorSource

T = 1_717_243_200_000  # a multiple of 100 ms


def snapshot(ts=T):
    return BookSnapshot(ts, ((100.0, 1.0), (99.0, 2.0)), ((101.0, 1.0), (102.0, 2.0)))


def test_an_order_added_and_cancelled_inside_one_batch_never_shows():
    events = [snapshot(), BookDelta(T + 10, bids=((100.5, 3.0),)), BookDelta(T + 60, bids=((100.5, 0.0),))]
    assert list(net_depth(events, 100)) == [snapshot()]


def test_a_level_changed_several_times_shows_once_with_its_last_quantity_at_the_batch_end():
    events = [snapshot(), BookDelta(T + 10, bids=((100.0, 4.0),)), BookDelta(T + 20, asks=((101.0, 0.5),)),
              BookDelta(T + 30, bids=((100.0, 2.5), (99.0, 2.0)))]  # 99 comes back to where it was
    assert list(net_depth(events, 100)) == [snapshot(), BookDelta(T + 99, bids=((100.0, 2.5),), asks=((101.0, 0.5),))]


def test_trades_pass_through_and_come_before_the_depth_of_their_batch():
    trade = Trade(T + 150, 101.0, 0.4, "buy")
    events = [snapshot(), BookDelta(T + 120, asks=((101.0, 0.9),)), trade, BookDelta(T + 151, asks=((101.0, 0.6),)),
              BookDelta(T + 230, bids=((100.0, 1.5),))]
    assert list(net_depth(events, 100)) == [
        snapshot(), trade, BookDelta(T + 199, asks=((101.0, 0.6),)), BookDelta(T + 299, bids=((100.0, 1.5),))]


def test_a_snapshot_sends_the_open_batch_first_and_becomes_the_reference():
    later = BookSnapshot(T + 50, ((100.0, 9.0),), ((101.0, 9.0),))
    events = [snapshot(), BookDelta(T + 10, bids=((100.0, 4.0),)), later, BookDelta(T + 60, bids=((100.0, 9.0),))]
    assert list(net_depth(events, 100)) == [snapshot(), BookDelta(T + 99, bids=((100.0, 4.0),)), later]


def test_no_batching_passes_every_event_through():
    events = [snapshot(), BookDelta(T + 10, bids=((100.5, 3.0),)), BookDelta(T + 60, bids=((100.5, 0.0),))]
    assert list(net_depth(events, 0)) == events


def _book_at_batch_ends(events, batch_ms):
    bids, asks, out = {}, {}, {}
    for ev in events:
        if isinstance(ev, BookSnapshot):
            bids, asks = dict(ev.bids), dict(ev.asks)
        elif isinstance(ev, BookDelta):
            levels_apply(bids, ev.bids)
            levels_apply(asks, ev.asks)
        else:
            continue
        out[ev.ts_ms // batch_ms] = (dict(bids), dict(asks))
    return out


def test_the_netted_feed_holds_the_same_book_at_every_batch_end():
    pair = PairRef("binance", "ETH", "USDT")
    events = list(SimulatorSource(3).events(pair, T, T + 120_000))
    netted = list(net_depth(events, 100))
    per_event, batched = _book_at_batch_ends(events, 100), _book_at_batch_ends(netted, 100)
    assert batched == {k: per_event[k] for k in batched}
    assert [e for e in netted if isinstance(e, Trade)] == [e for e in events if isinstance(e, Trade)]
    assert sum(isinstance(e, BookDelta) for e in netted) < sum(isinstance(e, BookDelta) for e in events)
    assert [e.ts_ms for e in netted] == sorted(e.ts_ms for e in netted)
