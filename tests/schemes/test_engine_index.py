"""The detector engine's index of open records by price (DetectorEngine._by_price) is kept
up as records come and expire. At each prune where records expired (or the index was
empty), it is exactly what a rebuild from the records gives: every live record under its
(side, price), in order, the prices whose level emptied since included again. The
detections were tuned with that rebuild."""

from pathlib import Path

import pytest

from market.sources.events import PairRef
from market.sources.simulator import SimulatorSource
from market.sources.venues import binance_recording_events
from schemes.detectors import engine as engine_module
from schemes.detectors.engine import DetectorEngine

RECORDING = Path(__file__).resolve().parents[2] / "data" / "realdata" / "binance-spot" / "btcusdt_20240808.gz"
BTC = PairRef("binance", "BTC", "USDT")


def rebuilt(engine):
    index = {}
    for side in ("bid", "ask"):
        for record in engine.records[side]:
            index.setdefault((side, record.price), []).append(record)
    return index


def checked_at_every_prune(engine, events):
    """Feed the events, comparing the index with the rebuild right after every prune that
    rebuilt it (the delta being read changes the index after its prune)."""
    prunes = []

    def prune_and_check(ts):
        oldest = [records[0] if records else None for records in engine.records.values()]
        was_empty = not engine._by_price
        DetectorEngine._prune(engine, ts)
        expired = any(first is not None and (not records or records[0] is not first)
                      for first, records in zip(oldest, engine.records.values()))
        if expired or was_empty:
            index, expected = engine._by_price, rebuilt(engine)
            assert index.keys() == expected.keys()
            assert all(len(index[key]) == len(records) and all(a is b for a, b in zip(index[key], records))
                       for key, records in expected.items())
            prunes.append(ts)

    engine._prune = prune_and_check
    for event in events:
        engine.feed(event)
    return len(prunes)


@pytest.mark.parametrize("seed", [11, 23])
def test_the_index_is_the_rebuild_at_every_prune_through_the_simulator_s_episodes(seed, monkeypatch):
    # the simulator resyncs its book every minute, which drops the records: a lifetime under
    # that makes them expire (and the index be checked) often within these 8 minutes
    monkeypatch.setattr(engine_module, "RECORD_TTL_MS", 45_000)
    engine = DetectorEngine(BTC, tick_size=0.01)
    t0 = 1_763_640_000_000
    events = list(SimulatorSource(seed=seed, episodes_per_hour=60).events(BTC, t0, t0 + 8 * 60_000))
    assert checked_at_every_prune(engine, events) > 50
    assert sum(len(records) for records in engine.records.values()) > 0


def test_the_index_is_the_rebuild_at_every_prune_on_real_netted_traffic():
    engine = DetectorEngine(BTC, tick_size=0.01, batch_ms=100)
    events = sorted(binance_recording_events(RECORDING, "BTCUSDT"), key=lambda e: e.ts_ms)
    assert checked_at_every_prune(engine, events) > 50
