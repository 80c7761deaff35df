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


class _Resting:
    """A source with only the first rule's measure (as the simulator has)."""

    def __init__(self, share):
        self.share = share

    def resting_at_pull(self, pair, ep):
        return self.share


class _Judging(_Resting):
    def __init__(self, share, reason):
        super().__init__(share)
        self.reason = reason

    def disrupted(self, pair, ep):
        return self.reason


def test_the_disrupted_rule_is_the_sources_and_a_source_without_one_keeps_what_rested_at_the_pull():
    from schemes.evaluation import DISRUPTED_BELOW, disrupted_reason, reason_thresholds

    assert not hasattr(SimulatorSource, "disrupted"), "the first market keeps its rule"
    assert disrupted_reason(_Resting(0.2), XRP, None) == "resting at the pull < 50 % (20 %)"
    assert disrupted_reason(_Resting(DISRUPTED_BELOW), XRP, None) is None
    assert disrupted_reason(_Resting(None), XRP, None) is None
    # a source that judges: its answer, whatever rested
    assert disrupted_reason(_Judging(0.2, None), XRP, None) is None
    reason = "executed > 10 % (25 %); removed within 60 s < 70 % (62 %)"
    assert disrupted_reason(_Judging(1.0, reason), XRP, None) == reason
    assert reason_thresholds(reason) == ["executed > 10 %", "removed within 60 s < 70 %"]


def test_latency_counts_from_the_instant_the_source_says_the_episode_became_a_whole_case(monkeypatch):
    played = _run()
    monkeypatch.setattr(SimulatorSource, "completed_ms", lambda self, pair, ep: ep.end_ms - 1000, raising=False)
    earlier = _run()
    for scheme, m in played.items():
        if m["detected"]:
            assert earlier[scheme]["latency_p50_ms"] == m["latency_p50_ms"] + 1000, scheme
    monkeypatch.setattr(SimulatorSource, "completed_ms", lambda self, pair, ep: None, raising=False)
    unknown = _run()
    assert {s: m["latency_p95_ms"] for s, m in unknown.items()} == {s: m["latency_p95_ms"] for s, m in played.items()}, \
        "no instant from the source: the episode's end"
