"""The detectors read bids and asks alike: the same simulated flow with every price mirrored
(bids and asks swapped, each taker's side swapped) gives the mirrored detections, at the
same instants. A rule written for one side only, or a loop whose order favours one side,
would break it."""

import dataclasses

import pytest

from market.sources.events import BookDelta, BookSnapshot, PairRef, Quote, Trade
from market.sources.netting import net_depth
from market.sources.simulator import SimulatorSource
from schemes.detectors import DetectorEngine

PAIR = PairRef("binance", "SOL", "USDT")
START_MS = 1_717_419_600_000
OTHER = {"bid": "ask", "ask": "bid"}


def mirrored(events, tick):
    first = next(e.price for e in events if isinstance(e, Trade))
    axis = round(2 * first / tick) * tick

    def price(p):
        return round(axis - p, 10)

    def mirror(e):
        if isinstance(e, Trade):
            return dataclasses.replace(e, price=price(e.price), side="sell" if e.side == "buy" else "buy")
        if isinstance(e, (BookDelta, BookSnapshot)):
            return dataclasses.replace(e, bids=tuple((price(p), q) for p, q in e.asks),
                                       asks=tuple((price(p), q) for p, q in e.bids))
        if isinstance(e, Quote):
            return Quote(e.ts_ms, price(e.ask_price), e.ask_qty, price(e.bid_price), e.bid_qty)
        return e

    return [mirror(e) for e in events]


@pytest.mark.parametrize("batch_ms", [0, 100], ids=["per event", "netted 100 ms"])
def test_a_mirrored_book_gives_the_mirrored_detections(batch_ms):
    source = SimulatorSource(104, episodes_per_hour=40.0, hard_negatives=True)
    tick = source.tick_size(PAIR)
    events = list(net_depth(source.events(PAIR, START_MS, START_MS + 20 * 60_000), batch_ms))

    def found(evs):
        return [(d.scheme, d.side, d.ts_ms)
                for d in DetectorEngine(PAIR, tick_size=tick, batch_ms=batch_ms).feed_many(evs)]

    original = found(events)
    assert {side for _, side, _ in original} == {"bid", "ask"}
    assert len({scheme for scheme, _, _ in original}) == 3
    assert sorted(found(mirrored(events, tick))) == sorted((scheme, OTHER[side], ts) for scheme, side, ts in original)
