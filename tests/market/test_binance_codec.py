"""The Binance codec on real recorded frames (data/realdata/binance-spot): the exact book by
Binance's documented sync, checked against an independent Decimal book at every diff."""

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from market.sources.events import BookDelta, BookSnapshot, Quote, Trade
from market.sources.venues.binance import BinanceCodec, binance_recording_events

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = {"BTCUSDT": ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz",
              "ETHUSDT": ROOT / "data/realdata/binance-spot/ethusdt_20240808.gz"}
TRADES = {"BTCUSDT": 9_757, "ETHUSDT": 6_106}  # counted in the files (trade ids contiguous)


def raw_lines(symbol):
    with gzip.open(RECORDINGS[symbol], "rt") as fh:
        return fh.read().splitlines()


def decimal_books(lines):
    """Yield (diff's last update id, bids, asks) after every diff applied, by the sync rules,
    with Decimal levels: written from Binance's documentation, not from the codec."""
    snapshot, synced, last_u, bids, asks = None, False, None, {}, {}
    pending = []
    for line in lines:
        message = json.loads(line.partition(" ")[2])
        if "lastUpdateId" in message:
            snapshot = message
            continue
        data = message["data"]
        if data.get("e") != "depthUpdate":
            continue
        pending.append(data)
        if snapshot is None:
            continue
        for diff in pending:
            if not synced:
                if diff["u"] <= snapshot["lastUpdateId"]:
                    continue
                assert diff["U"] <= snapshot["lastUpdateId"] + 1
                bids = {Decimal(p): Decimal(q) for p, q in snapshot["bids"]}
                asks = {Decimal(p): Decimal(q) for p, q in snapshot["asks"]}
                synced = True
            else:
                assert diff["U"] == last_u + 1
            last_u = diff["u"]
            for side, levels in ((bids, diff["b"]), (asks, diff["a"])):
                for p, q in levels:
                    if Decimal(q) == 0:
                        side.pop(Decimal(p), None)
                    else:
                        side[Decimal(p)] = Decimal(q)
            yield last_u, bids, asks
        pending = []


def codec_books(lines, symbol):
    codec = BinanceCodec(symbol)
    bids, asks = {}, {}
    for line in lines:
        message = json.loads(line.partition(" ")[2])
        events = codec.on_snapshot(message) if "lastUpdateId" in message else codec.on_message(message)
        for event in events:
            if type(event) is BookSnapshot:
                bids, asks = dict(event.bids), dict(event.asks)
            elif type(event) is BookDelta:
                for side, levels in ((bids, event.bids), (asks, event.asks)):
                    for p, q in levels:
                        if q > 0:
                            side[p] = q
                        else:
                            side.pop(p, None)
                yield codec.last_u, bids, asks


@pytest.mark.parametrize("symbol", ["BTCUSDT", "ETHUSDT"])
def test_the_book_is_exact_at_every_diff_of_a_real_recording(symbol):
    lines = raw_lines(symbol)
    checked = 0
    for (u, bids, asks), (ref_u, ref_bids, ref_asks) in zip(codec_books(lines, symbol), decimal_books(lines),
                                                           strict=True):
        assert u == ref_u
        assert len(bids) == len(ref_bids) and len(asks) == len(ref_asks)
        top = sorted(ref_bids, reverse=True)[:10], sorted(ref_asks)[:10]
        assert [(float(p), float(ref_bids[p])) for p in top[0]] == sorted(bids.items(), reverse=True)[:10]
        assert [(float(p), float(ref_asks[p])) for p in top[1]] == sorted(asks.items())[:10]
        checked += 1
    assert checked > 3_000
    assert {float(p): float(q) for p, q in ref_bids.items()} == bids  # the whole book at the end


@pytest.mark.parametrize("symbol", ["BTCUSDT", "ETHUSDT"])
def test_every_trade_of_a_real_recording_comes_through_once_with_the_taker_side(symbol):
    lines = raw_lines(symbol)
    events = list(binance_recording_events(lines, symbol))
    trades = [e for e in events if type(e) is Trade]
    assert len(trades) == TRADES[symbol]
    raw = [json.loads(line.partition(" ")[2])["data"] for line in lines if "@trade" in line[:80]]
    assert [(t.ts_ms, t.trade_id, t.side) for t in trades] == [
        (r["T"], str(r["t"]), "sell" if r["m"] else "buy") for r in raw]


def test_the_snapshot_takes_the_time_of_the_first_diff_applied_after_it():
    events = list(binance_recording_events(raw_lines("BTCUSDT"), "BTCUSDT"))
    books = [e for e in events if type(e) in (BookSnapshot, BookDelta)]
    assert type(books[0]) is BookSnapshot and type(books[1]) is BookDelta
    assert books[0].ts_ms == books[1].ts_ms
    assert len(books[0].bids) == 1_000 and len(books[0].asks) == 1_000
    codec = BinanceCodec("BTCUSDT")
    for line in raw_lines("BTCUSDT"):
        message = json.loads(line.partition(" ")[2])
        codec.on_snapshot(message) if "lastUpdateId" in message else codec.on_message(message)
    assert codec.snapshot_reach_pct == 0.333  # 1,000 levels reach 0.333 % of the mid: the 1 % band is not all known


def diff(first, last, ts, bids=(), asks=()):
    return {"stream": "btcusdt@depth@100ms", "data": {"e": "depthUpdate", "E": ts, "s": "BTCUSDT", "U": first,
                                                      "u": last, "b": list(bids), "a": list(asks)}}


def ticker(u, bid, ask):
    return {"stream": "btcusdt@bookTicker", "data": {"u": u, "s": "BTCUSDT", "b": bid, "B": "1.0", "a": ask,
                                                     "A": "2.0"}}


SNAPSHOT = {"lastUpdateId": 100, "bids": [["10.0", "1.0"]], "asks": [["11.0", "1.0"]]}


def test_a_ticker_is_stamped_with_its_batch_and_comes_before_the_batch():
    codec = BinanceCodec("BTCUSDT")
    assert codec.on_message(diff(95, 101, 1_000)) == []
    events = codec.on_snapshot(SNAPSHOT)
    assert [type(e) for e in events] == [BookSnapshot, BookDelta] and events[0].ts_ms == 1_000
    assert codec.on_message(ticker(103, "10.5", "11.0")) == []
    assert codec.on_message(ticker(101, "10.4", "11.0")) == []  # its batch was applied: dropped
    events = codec.on_message(diff(102, 105, 1_100, bids=[["10.5", "3"]]))
    assert events == [Quote(1_100, 10.5, 1.0, 11.0, 2.0), BookDelta(1_100, ((10.5, 3.0),), ())]


def test_a_ticker_that_arrives_while_the_snapshot_is_awaited_counts_once_the_book_syncs():
    """The snapshot was served (lastUpdateId 100) before the diff 101-102 and the ticker of
    update 102 went out, but it reaches us after them: an exact reader holds the book from
    that diff on, so the ticker is its quote. One older than the diff that syncs the book is
    dropped, as it is once the book is held."""
    codec = BinanceCodec("BTCUSDT")
    assert codec.on_message(diff(95, 99, 900)) == []
    assert codec.on_message(ticker(99, "10.3", "11.0")) == []
    assert codec.on_message(diff(100, 102, 1_000)) == []
    assert codec.on_message(ticker(103, "10.5", "11.0")) == []
    assert [type(e) for e in codec.on_snapshot(SNAPSHOT)] == [BookSnapshot, BookDelta]
    events = codec.on_message(diff(103, 104, 1_100))
    assert events == [Quote(1_100, 10.5, 1.0, 11.0, 2.0), BookDelta(1_100, (), ())]


def test_a_gap_loses_the_book_and_asks_for_a_new_snapshot():
    codec = BinanceCodec("BTCUSDT")
    codec.on_snapshot(SNAPSHOT)
    assert len(codec.on_message(diff(99, 102, 1_000))) == 2
    assert codec.on_message(ticker(104, "10.5", "11.0")) == []
    assert codec.on_message(diff(104, 106, 1_100)) == []  # 103 is missing
    assert not codec.synced and codec.wants_snapshot == "sequence gap: expected U=103, got U=104"
    events = codec.on_snapshot({"lastUpdateId": 106, "bids": [["10.1", "1.0"]], "asks": [["11.0", "1.0"]]})
    assert events == []  # the buffered diff is older than the snapshot: wait for the next
    events = codec.on_message(diff(107, 108, 1_300))
    assert [type(e) for e in events] == [BookSnapshot, BookDelta] and events[0].bids == ((10.1, 1.0),)


def test_a_snapshot_older_than_the_diffs_held_is_refused():
    codec = BinanceCodec("BTCUSDT")
    codec.on_message(diff(150, 160, 1_000))
    assert codec.on_snapshot(SNAPSHOT) == []
    assert codec.wants_snapshot.startswith("snapshot too old") and not codec.synced
    events = codec.on_snapshot({"lastUpdateId": 155, "bids": [], "asks": [["11.0", "1.0"]]})
    assert [type(e) for e in events] == [BookSnapshot, BookDelta]


def test_skipped_trade_ids_are_counted_and_repeats_dropped():
    codec = BinanceCodec("BTCUSDT")

    def trade(t):
        return {"stream": "btcusdt@trade", "data": {"e": "trade", "E": t, "s": "BTCUSDT", "t": t, "p": "10",
                                                    "q": "1", "T": t, "m": False}}

    assert len(codec.on_message(trade(5))) == 1
    assert len(codec.on_message(trade(9))) == 1
    assert codec.on_message(trade(9)) == []
    assert codec.trades_missed == 3
