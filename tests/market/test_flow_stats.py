"""The flow measurements the simulator is calibrated against, on real and simulated streams."""

from pathlib import Path

import pytest

from market.sources.events import BookDelta, BookSnapshot, Trade
from market.sources.flow_stats import flow_profile

ROOT = Path(__file__).resolve().parents[2]
T = 1_717_243_200_000


def test_rates_message_shape_and_depth_profile_of_a_hand_built_stream():
    events = [BookSnapshot(T, tuple((100.0 - i, 1.0 + i) for i in range(20)), tuple((101.0 + i, 1.0) for i in range(20)))]
    for s in range(10):
        ts = T + s * 1000 + 500
        events.append(Trade(ts, 101.0, 0.5, "buy"))
        events.append(BookDelta(ts, bids=tuple((100.0 - i, 2.0 + i) for i in range(12))))
    prof = flow_profile(events)
    assert prof["trades_per_s"] == pytest.approx(10 / 9.5, rel=0.01)
    assert prof["levels_per_message_p50"] == 12 and prof["messages_with_10_levels_share"] == 1.0
    assert prof["trade_qty_median"] == 0.5
    assert prof["level_qty_median"][0] in (1.0, 2.0)


@pytest.mark.skipif(not (ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz").exists(), reason="recording")
def test_real_binance_flow_is_netted_ladders_with_a_heavy_touch():
    from market.sources.venues import binance_recording_events

    events = sorted(binance_recording_events(ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz", "BTCUSDT"),
                    key=lambda e: e.ts_ms)
    prof = flow_profile(events)
    assert 9 <= prof["depth_messages_per_s"] <= 11  # one message per 100 ms batch
    assert prof["levels_per_message_p90"] >= 50  # ladders re-quoted dozens of levels at once
    assert prof["level_qty_median"][0] > 10 * prof["level_qty_median"][4]  # the touch holds the queue


@pytest.mark.skipif(not (ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz").exists(), reason="recording")
def test_the_simulator_netted_like_binance_matches_the_recorded_flow_within_a_factor_of_two():
    """The calibration the detection evaluation stands on (docs/DETECTION_EVALUATION.md)."""
    from market.sources.events import PairRef
    from market.sources.netting import net_depth
    from market.sources.simulator import SimulatorSource
    from market.sources.venues import binance_recording_events

    real = flow_profile(sorted(binance_recording_events(ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz",
                                                        "BTCUSDT"), key=lambda e: e.ts_ms))
    start = 1_717_419_600_000  # the evaluation's held-out hour
    simulated = SimulatorSource(101).events(PairRef("binance", "BTC", "USDT"), start, start + 10 * 60_000)
    sim = flow_profile(net_depth(list(simulated), 100))
    for key in ("trades_per_s", "level_updates_per_s", "near_level_updates_per_s", "levels_per_message_p90",
                "depth_messages_per_s"):
        assert 0.5 <= sim[key] / real[key] <= 2.0, (key, sim[key], real[key])
    assert abs(sim["mid_still_share"] - real["mid_still_share"]) <= 0.15
    assert sim["level_qty_median"][0] > 5 * sim["level_qty_median"][4]  # a heavy touch, thin levels behind
