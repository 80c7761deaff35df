"""GET .../schemes, storage without repeats, retention."""

import time

import pytest

from schemes.models import SchemeEvent
from schemes.services import scheme_events_purge, scheme_events_store

URL = "/api/v1/streams/binance/BTC/USDT/schemes"
HOUR = 3_600_000


def detection(ts_ms, scheme="layering", side="bid", build_start=None, confidence=0.8):
    return {"scheme": scheme, "side": side, "direction": "up" if side == "bid" else "down", "ts_ms": ts_ms,
            "price": 100.0, "confidence": confidence, "alert_score": 55.0,
            "build": {"start_ms": build_start or ts_ms - 5000, "levels": 3},
            "collapse": {"end_ms": ts_ms - 100, "cancel_ratio": 0.9}}


def now_ms():
    return int(time.time() * 1000)


def test_history_is_newest_first_within_the_lookback(api, btc):
    now = now_ms()
    scheme_events_store(pair=btc, detections=[detection(now - 2 * HOUR), detection(now - 30 * HOUR),
                                              detection(now - 1000, scheme="flipping", side="ask")])
    body = api.get(URL).json()
    assert body["end_ms"] - body["start_ms"] == 24 * HOUR
    assert [e["scheme"] for e in body["events"]] == ["flipping", "layering"]
    event = body["events"][0]
    assert set(event) == {"id", "ts_ms", "scheme", "direction", "side", "price", "confidence", "alert_score",
                          "build", "collapse"}
    assert len(api.get(URL + "?lookback_hours=48").json()["events"]) == 3


def test_limit_keeps_the_newest(api, btc):
    now = now_ms()
    scheme_events_store(pair=btc, detections=[detection(now - i * 1000, build_start=now - i * 1000 - 50)
                                              for i in range(150)])
    events = api.get(URL + "?limit=100").json()["events"]
    assert len(events) == 100 and events[0]["ts_ms"] == now


@pytest.mark.parametrize("query, parameter", [("lookback_hours=0", "lookback_hours"),
                                              ("lookback_hours=721", "lookback_hours"),
                                              ("lookback_hours=x", "lookback_hours"),
                                              ("limit=99", "limit"), ("limit=50001", "limit")])
def test_out_of_range_queries_are_400(api, btc, query, parameter):
    response = api.get(f"{URL}?{query}")
    assert response.status_code == 400 and response.json()["error"]["details"]["parameter"] == parameter


def test_the_edges_of_the_ranges_are_accepted(api, btc):
    for query in ("lookback_hours=1", "lookback_hours=720", "limit=100", "limit=50000"):
        assert api.get(f"{URL}?{query}").status_code == 200


def test_unknown_pair_is_404(api, btc):
    assert api.get("/api/v1/streams/binance/NOPE/USDT/schemes").status_code == 404


def test_the_same_episode_is_stored_once(btc):
    now = now_ms()
    first = scheme_events_store(pair=btc, detections=[detection(now, build_start=now - 4000)])
    again = scheme_events_store(pair=btc, detections=[detection(now + 200, build_start=now - 4000)])
    assert len(first) == 1 and again == [] and SchemeEvent.objects.count() == 1


def test_events_older_than_720_hours_are_purged(btc):
    # a day past the retention: in PostgreSQL the purge drops whole days of events
    now = now_ms()
    scheme_events_store(pair=btc, detections=[detection(now - 745 * HOUR), detection(now - 719 * HOUR)])
    assert scheme_events_purge(now_ms=now) == 1
    assert list(SchemeEvent.objects.values_list("ts_ms", flat=True)) == [now - 719 * HOUR]


def test_schemes_are_counted_and_need_streaming(api, btc, make_account, client_for):
    from accounts.services import api_key_create
    from billing.services import plan_upsert

    assert api.get(URL)["X-Quota-Requests-Used"] == "1"
    account = make_account()
    account.plan = plan_upsert(name="data", features=["api"], monthly_requests=10, monthly_bytes=10**6)
    account.save()
    assert client_for(api_key_create(account=account, name="k").plaintext).get(URL).status_code == 403
