"""The offline evaluation's accounting (schemes/evaluation.py)."""

from market.sources.events import PairRef
from market.sources.simulator import SimulatorSource
from schemes.evaluation import evaluate

XRP = PairRef("binance", "XRP", "USDT")


def _run():
    return evaluate([7], [XRP], hours_per_seed=0.25, episodes_per_hour=24.0)["schemes"]


def test_an_episode_the_market_took_before_its_pull_is_outside_recall_and_its_detection_counts_neither_way(
        monkeypatch):
    played = _run()
    clear = {s: m["episodes"] + m["disrupted"] for s, m in played.items()}
    assert sum(clear.values()) > 0 and sum(m["detected"] for m in played.values()) > 0

    monkeypatch.setattr(SimulatorSource, "resting_at_pull", lambda self, pair, ep: 0.2)
    disrupted = _run()
    for scheme, m in disrupted.items():
        assert m["disrupted"] == clear[scheme], "every clear episode had too little left to pull"
        assert m["episodes"] == m["detected"] == 0, "none of them is in recall"
        assert m["disrupted_flagged"] == played[scheme]["detected"] + played[scheme]["disrupted_flagged"]
        assert m["false_positives"] == played[scheme]["false_positives"], "their detections are no false positives"
