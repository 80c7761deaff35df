"""The scale benchmark's load generator (LoopingBinanceExchange, tests/venues/server.py):
many symbols from the two recordings, looped, with a book a client keeps across passes
without a resync and trade ids and times that keep increasing."""

import time

import orjson

from market.sources.events import BookSnapshot, PairRef, Trade
from market.sources.venues import feed_for

from .server import BINANCE_BTC, LoopingBinanceExchange, _fill, _LoopedRecording
from .test_live_adapter import Running


def test_a_pass_boundary_diff_turns_the_book_at_the_recording_s_end_back_into_its_snapshot():
    recording = _LoopedRecording(BINANCE_BTC, "BTCUSDT")
    bids, asks = (dict(side) for side in recording.snapshot_book)
    for data in recording.frames_data:
        if data is not None:
            recording._apply(bids, asks, data)
    values = {"e": 0, "u": recording.id_step, "t": 0, "l": b"s001usdt", "s": b"S001USDT"}
    bridge = orjson.loads(_fill(recording.bridge, values))["data"]
    assert bridge["U"] == bridge["u"] == recording.last_id + 1  # continues the last pass's last diff
    recording._apply(bids, asks, bridge)
    assert (bids, asks) == recording.snapshot_book


def test_a_client_keeps_its_book_across_passes_of_many_symbols_without_a_resync():
    with LoopingBinanceExchange(symbols=4, limit_s=4) as venue:  # ~4 s passes
        assert list(venue.symbols) == ["S001USDT", "S002USDT", "S003USDT", "S004USDT"]
        assert {s.recording.template_symbol for s in venue.symbols.values()} == {"BTCUSDT", "ETHUSDT"}
        assert len({(s.recording.template_symbol, s.phase_s) for s in venue.symbols.values()}) == 4
        feeds = [Running(feed_for("binance", ws_url=venue.ws_url, rest_url=venue.rest_url, stale_after_s=5.0),
                         PairRef("binance", name[:-4], "USDT")) for name in ("S001USDT", "S002USDT")]
        for running in feeds:
            running.__enter__()
        time.sleep(11)
        for running in feeds:
            running.__exit__()
        stats = venue.stats()
    assert stats["passes"] >= 8 and stats["messages"] > 2 * 8 * 50 and stats["depth_requests"] == 2
    for running in feeds:
        assert running.error is None, running.error
        status = running.last_status
        assert (status.resyncs, status.trades_missed, status.disconnects) == (0, 0, 0)
        events = running.buffer.events(0, 2**62)
        assert sum(type(e) is BookSnapshot for e in events) == 1  # synced once, kept through every pass
        trades = [e for e in events if type(e) is Trade]
        ids = [int(t.trade_id) for t in trades]
        assert ids == list(range(ids[0], ids[0] + len(ids)))  # trade ids continue across passes
        times = [t.ts_ms for t in trades]
        assert times == sorted(times) and abs(times[-1] - time.time() * 1000) < 3000  # stamped as sent
