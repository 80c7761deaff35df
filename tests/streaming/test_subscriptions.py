"""GET/POST /streams and DELETE /streams/{pair}: idempotent, additive, per account."""

import pytest

from billing.models import PairBillingPeriod
from streaming.models import IngestionState, StreamSubscription

STREAMS = "/api/v1/streams"


def subscribe(api, metrics=None, pair=("binance", "BTC", "USDT")):
    body = dict(zip(("exchange", "base", "quote"), pair))
    if metrics is not None:
        body["metrics"] = metrics
    return api.post(STREAMS, body, format="json")


def test_list_shows_every_streamable_pair_and_what_this_account_takes(api, catalog):
    subscribe(api, ["trade"])
    pairs = api.get(STREAMS).json()["pairs"]
    assert len(pairs) == len(catalog)
    btc = next(p for p in pairs if p["symbol"] == "BTC-USDT" and p["exchange"] == "binance")
    assert btc == {"exchange": "binance", "base": "BTC", "quote": "USDT", "symbol": "BTC-USDT",
                   "source": "simulator", "simulated": True, "subscribed": True, "metrics": ["trade"]}
    other = next(p for p in pairs if p["exchange"] == "kraken")
    assert other["subscribed"] is False and other["metrics"] == []


def test_first_subscribe_is_201_with_all_metrics_by_default(api, btc):
    response = subscribe(api)
    assert response.status_code == 201
    body = response.json()
    assert body["metrics"] == ["trade", "book", "quote"] and body["state"] == "REQUESTED"
    assert (body["exchange"], body["base"], body["quote"]) == ("binance", "BTC", "USDT")


def test_subscribe_twice_unions_metrics_and_never_narrows(api, btc):
    assert subscribe(api, ["trade"]).status_code == 201
    second = subscribe(api, ["quote"])
    assert second.status_code == 200 and second.json()["metrics"] == ["trade", "quote"]
    third = subscribe(api, ["trade"])
    assert third.json()["metrics"] == ["trade", "quote"]
    assert StreamSubscription.objects.count() == 1


def test_pair_path_is_case_insensitive_and_echoed_canonically(api, btc):
    body = subscribe(api, ["book"], pair=("Binance", "btc", "usdt")).json()
    assert (body["exchange"], body["base"], body["quote"]) == ("binance", "BTC", "USDT")


@pytest.mark.parametrize("body, parameter", [
    ({"exchange": "binance", "base": "BTC", "quote": "EUR"}, "pair"),
    ({"exchange": "nyse", "base": "BTC", "quote": "USDT"}, "pair"),
    ({"base": "BTC", "quote": "USDT"}, "exchange"),
    ({"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": []}, "metrics"),
    ({"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["trades"]}, "metrics"),
    ({"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": "trade"}, "metrics"),
    ({"exchange": 7, "base": "BTC", "quote": "USDT"}, "exchange"),
])
def test_bad_subscribe_bodies_are_400(api, btc, body, parameter):
    response = api.post(STREAMS, body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_parameter"
    assert response.json()["error"]["details"]["parameter"] == parameter


def test_delete_the_whole_pair_is_204_and_again_204(api, btc):
    subscribe(api)
    assert api.delete("/api/v1/streams/binance/BTC/USDT").status_code == 204
    assert api.delete("/api/v1/streams/binance/BTC/USDT").status_code == 204
    assert StreamSubscription.objects.count() == 0


def test_delete_one_metric_keeps_the_others(api, btc):
    subscribe(api)
    assert api.delete("/api/v1/streams/binance/btc/usdt?metric=book").status_code == 204
    assert StreamSubscription.objects.get().metrics == ["trade", "quote"]
    assert api.delete("/api/v1/streams/binance/BTC/USDT?metric=book").status_code == 204
    assert api.delete("/api/v1/streams/binance/BTC/USDT?metric=trade").status_code == 204
    api.delete("/api/v1/streams/binance/BTC/USDT?metric=quote")
    assert StreamSubscription.objects.count() == 0


def test_delete_with_a_bad_metric_is_400(api, btc):
    response = api.delete("/api/v1/streams/binance/BTC/USDT?metric=depth")
    assert response.status_code == 400 and response.json()["error"]["details"]["parameter"] == "metric"


def test_delete_of_an_unknown_pair_is_204(api, btc):
    assert api.delete("/api/v1/streams/nowhere/FOO/BAR").status_code == 204


def test_two_accounts_subscribing_share_one_ingestion(api, btc, make_account, client_for):
    from accounts.services import api_key_create

    other = client_for(api_key_create(account=make_account(), name="k").plaintext)
    subscribe(api)
    subscribe(other, ["trade"])
    assert IngestionState.objects.filter(pair=btc).count() == 1
    assert IngestionState.objects.get(pair=btc).wanted
    api.delete("/api/v1/streams/binance/BTC/USDT")
    state = IngestionState.objects.get(pair=btc)
    assert state.wanted and state.unwanted_since is None
    other.delete("/api/v1/streams/binance/BTC/USDT")
    assert IngestionState.objects.get(pair=btc).unwanted_since is not None


def test_accounts_do_not_see_each_others_subscriptions(api, btc, make_account, client_for):
    from accounts.services import api_key_create

    other = client_for(api_key_create(account=make_account(), name="k").plaintext)
    subscribe(api)
    assert not any(p["subscribed"] for p in other.get(STREAMS).json()["pairs"])
    other.delete("/api/v1/streams/binance/BTC/USDT")
    assert StreamSubscription.objects.count() == 1


def test_ledger_opens_and_closes_pair_periods(api, btc):
    subscribe(api, ["trade"])
    subscribe(api, ["trade"])
    subscribe(api, ["book"])
    api.delete("/api/v1/streams/binance/BTC/USDT")
    periods = list(PairBillingPeriod.objects.order_by("started_at", "id"))
    assert [p.metrics for p in periods] == ["trade", "trade,book"]
    assert all(p.ended_at is not None for p in periods)


def test_streaming_routes_need_the_streaming_feature(make_account, client_for, btc):
    from accounts.services import api_key_create
    from billing.services import plan_upsert

    account = make_account()
    account.plan = plan_upsert(name="data", features=["api"], monthly_requests=100, monthly_bytes=10**6)
    account.save()
    client = client_for(api_key_create(account=account, name="k").plaintext)
    for method, url in (("get", STREAMS), ("post", STREAMS), ("delete", "/api/v1/streams/binance/BTC/USDT"),
                        ("get", "/api/v1/streams/binance/BTC/USDT/status"),
                        ("post", "/api/v1/streams/binance/BTC/USDT/snapshot"),
                        ("get", "/api/v1/streams/binance/BTC/USDT/live")):
        response = getattr(client, method)(url)
        assert response.status_code == 403, url
        assert response.json()["error"]["code"] == "plan_forbidden"


def test_control_plane_calls_are_counted(api, btc):
    first = api.get(STREAMS)
    second = subscribe(api)
    assert second["X-Quota-Requests-Used"] == "2"
    assert int(second["X-Quota-Bytes-Used"]) == len(first.content) + len(second.content)
    deleted = api.delete("/api/v1/streams/binance/BTC/USDT")
    assert deleted["X-Quota-Requests-Used"] == "3"


def test_streams_list_round_trips_through_toon(api, btc):
    import toon_format

    subscribe(api, ["trade"])
    as_json = api.get(STREAMS).json()
    as_toon = api.get(STREAMS, HTTP_ACCEPT="application/toon").content.decode()
    assert "pairs[" in as_toon
    assert toon_format.decode(as_toon) == as_json
