"""The client against httpx.MockTransport: what it sends, how it reads JSON and TOON,
the errors it raises, the quota it exposes and its wait on 429."""

import asyncio
import json
from datetime import date, datetime, timezone

import httpx
import pytest
import toon_format

import marketdata
from marketdata import (ApiError, AsyncClient, AuthenticationError, Client, Forbidden, InvalidRequest, NotFound,
                        PaymentRequired, QuotaExceeded, Unavailable)

KEY = "mdp_live_" + "a" * 50
QUOTA_HEADERS = {"X-Quota-Requests-Limit": "100", "X-Quota-Requests-Used": "7", "X-Quota-Requests-Remaining": "93",
                 "X-Quota-Bytes-Limit": "1000", "X-Quota-Bytes-Used": "400", "X-Quota-Bytes-Remaining": "600",
                 "X-Quota-Reset": "1796083200", "X-Request-Id": "req-1"}
CANDLES = {"meta": {"source_type": "exchange", "source": "binance", "symbol": "BTC-USDT", "metric_type": "candlestick",
                    "sides": ["ohlc"], "resolution": "daily", "start": "2026-10-01", "end": "2026-10-02", "count": 2},
           "data": [{"date": "2026-10-01", "open": 1.5, "high": 2.0, "low": 1.0, "close": 2.0,
                     "observation_count": 3, "price_sum": 100.0, "price_variance": 0.25},
                    {"date": "2026-10-02", "open": 2.0, "high": 3.0, "low": 2.0, "close": 3.0,
                     "observation_count": 4, "price_sum": 12.0, "price_variance": 1.0}]}


def answer(document, status=200, format="json", headers=QUOTA_HEADERS):
    if format == "toon":
        return httpx.Response(status, content=toon_format.encode(document).encode(),
                              headers={**headers, "Content-Type": "application/toon; charset=utf-8"})
    return httpx.Response(status, content=json.dumps(document).encode(),
                          headers={**headers, "Content-Type": "application/json"})


def envelope(status, code, details=None, headers=None, format="json"):
    return answer({"error": {"code": code, "message": f"{code} happened", "details": details or {},
                             "request_id": "rid-9"}}, status, format, {**QUOTA_HEADERS, **(headers or {})})


def client_with(handler, **options):
    return Client(KEY, "http://api.test", transport=httpx.MockTransport(handler), **options)


def test_a_series_call_posts_only_the_given_fields_with_the_key_and_the_asked_format():
    seen = []

    def handler(request):
        seen.append(request)
        return answer(CANDLES, format="toon")

    with client_with(handler, format="toon") as client:
        client.candlestick("binance", "BTC-USDT", date(2026, 10, 1), "2026-10-02")
    (request,) = seen
    assert request.method == "POST" and request.url.path == "/api/v1/market/candlestick"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Accept"] == "application/toon"
    assert json.loads(request.content) == {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-10-01",
                                           "end": "2026-10-02"}  # no nulls for the options not given


@pytest.mark.parametrize("base", ["http://api.test", "http://api.test/", "http://api.test/api/v1"])
def test_the_base_url_may_include_the_api_prefix(base):
    paths = []
    client = Client(KEY, base, transport=httpx.MockTransport(lambda r: paths.append(r.url.path) or answer(CANDLES)))
    client.candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-02")
    assert paths == ["/api/v1/market/candlestick"]


def test_json_and_toon_give_equal_results_of_equal_types():
    results = [client_with(lambda r, f=f: answer(CANDLES, format=f), format=f).candlestick(
        "binance", "BTC-USDT", "2026-10-01", "2026-10-02") for f in ("json", "toon")]
    assert results[0] == results[1]
    for a, b in zip(results[0].rows, results[1].rows):
        assert a == b and [type(v) for v in a.values()] == [type(v) for v in b.values()]
    assert isinstance(results[1].rows[0]["price_sum"], float)  # TOON wrote 100.0 as 100


def test_every_result_carries_the_quota_and_request_id():
    series = client_with(lambda r: answer(CANDLES)).candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-02")
    assert series.quota == marketdata.Quota(100, 7, 93, 1000, 400, 600, datetime(2026, 12, 1, tzinfo=timezone.utc))
    assert series.request_id == "req-1"
    assert len(series) == 2 and series.meta.count == 2


@pytest.mark.parametrize("status, code, cls", [
    (400, "invalid_parameter", InvalidRequest), (401, "unauthorized", AuthenticationError),
    (402, "payment_required", PaymentRequired), (403, "plan_forbidden", Forbidden), (404, "not_found", NotFound),
    (415, "unsupported_media_type", InvalidRequest), (502, "temporarily_unavailable", Unavailable),
    (503, "temporarily_unavailable", Unavailable), (418, "teapot", ApiError)])
@pytest.mark.parametrize("format", ["json", "toon"])
def test_an_error_envelope_is_raised_as_its_class_with_code_message_details_and_request_id(status, code, cls, format):
    client = client_with(lambda r: envelope(status, code, {"parameter": "end"}, format=format), format=format)
    with pytest.raises(cls) as raised:
        client.status("binance/BTC/USDT")
    error = raised.value
    assert (error.status, error.code, error.message, error.details, error.request_id) == (
        status, code, f"{code} happened", {"parameter": "end"}, "rid-9")
    assert error.quota.requests_used == 7


def test_an_error_without_an_envelope_still_raises_by_status():
    client = client_with(lambda r: httpx.Response(502, text="<html>bad gateway</html>",
                                                  headers={"Content-Type": "text/html", "X-Request-Id": "x"}))
    with pytest.raises(Unavailable) as raised:
        client.usage()
    assert raised.value.code == "http_502" and raised.value.request_id == "x"


def quota_then(ok_after: int, retry_after: str = "2"):
    calls = []

    def handler(request):
        calls.append(request)
        if len(calls) <= ok_after:
            return envelope(429, "quota_exceeded", {"resets_at": "2026-12-01T00:00:00Z"}, {"Retry-After": retry_after})
        return answer(CANDLES)

    return handler, calls


def test_a_429_raises_at_once_by_default_with_retry_after_and_resets_at():
    handler, calls = quota_then(1)
    with pytest.raises(QuotaExceeded) as raised:
        client_with(handler).candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-02")
    assert len(calls) == 1
    assert raised.value.retry_after == 2.0
    assert raised.value.resets_at == datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_wait_on_quota_sleeps_retry_after_and_retries_within_max_wait():
    handler, calls = quota_then(2)
    client = client_with(handler, wait_on_quota=True, max_wait=5)
    slept = []
    client._transport.sleep = slept.append
    series = client.candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-02")
    assert len(series) == 2 and slept == [2.0, 2.0] and len(calls) == 3


def test_wait_on_quota_raises_when_retry_after_is_beyond_max_wait():
    handler, calls = quota_then(5, retry_after="86400")
    client = client_with(handler, wait_on_quota=True, max_wait=60)
    slept = []
    client._transport.sleep = slept.append
    with pytest.raises(QuotaExceeded):
        client.usage()
    assert slept == [] and len(calls) == 1


def test_the_async_client_waits_on_quota_too():
    handler, calls = quota_then(1, retry_after="1")

    async def main():
        async with AsyncClient(KEY, "http://api.test", transport=httpx.MockTransport(handler), wait_on_quota=True,
                               max_wait=3) as client:
            slept = []

            async def sleep(seconds):
                slept.append(seconds)

            client._transport.sleep = sleep
            series = await client.candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-02")
            return series, slept

    series, slept = asyncio.run(main())
    assert len(series) == 2 and slept == [1.0] and len(calls) == 2


def test_stream_methods_address_the_pair_path_and_send_their_options():
    seen = []
    documents = {
        "/api/v1/streams": {"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["trade"],
                            "state": "REQUESTED"},
        "/api/v1/streams/binance/BTC/USDT/snapshot": {
            "exchange": "binance", "base": "BTC", "quote": "USDT", "granularity": "minute", "from_ms": 0,
            "to_ms": 60000, "metrics": ["trade"], "count": 0, "bars": []},
        "/api/v1/streams/binance/BTC/USDT/schemes": {"start_ms": 0, "end_ms": 1, "events": []},
        "/api/v1/streams/binance/BTC/USDT/live": None,
    }

    def handler(request):
        seen.append((request.method, request.url.path, dict(request.url.params),
                     json.loads(request.content) if request.content else None))
        if request.method == "DELETE":
            return httpx.Response(204, headers=QUOTA_HEADERS)
        return answer(documents[request.url.path], 201 if request.url.path == "/api/v1/streams" else 200)

    client = client_with(handler)
    subscription = client.subscribe("binance/BTC/USDT", metrics=["trade"])
    assert subscription.created and subscription.metrics == ["trade"]
    assert client.unsubscribe(("binance", "BTC", "USDT"), metric="book").quota.requests_used == 7
    snapshot = client.snapshot("binance/BTC/USDT", ["trade"], "minute",
                               from_ms=datetime(2026, 1, 1, tzinfo=timezone.utc), to_ms=1767225660000)
    assert snapshot.to_pandas().columns.tolist()[:2] == ["ts", "open"]
    assert client.schemes("binance/BTC/USDT", lookback_hours=2).events == []
    assert client.latest("binance/BTC/USDT").bar is None
    assert seen == [
        ("POST", "/api/v1/streams", {}, {"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["trade"]}),
        ("DELETE", "/api/v1/streams/binance/BTC/USDT", {"metric": "book"}, None),
        ("POST", "/api/v1/streams/binance/BTC/USDT/snapshot", {},
         {"metrics": ["trade"], "granularity": "minute", "from_ms": 1767225600000, "to_ms": 1767225660000}),
        ("GET", "/api/v1/streams/binance/BTC/USDT/schemes", {"lookback_hours": "2"}, None),
        ("GET", "/api/v1/streams/binance/BTC/USDT/live", {}, None)]


def test_a_pair_in_the_series_form_is_refused_with_the_path_to_use():
    client = client_with(lambda r: pytest.fail("nothing must be sent"))
    with pytest.raises(ValueError, match="binance/BTC/USDT"):
        client.status("binance/BTC-USDT")


def test_an_unknown_format_is_refused_when_the_client_is_made():
    with pytest.raises(ValueError, match="json"):
        Client(KEY, format="xml")


def test_the_key_may_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("MARKETDATA_API_KEY", KEY)
    seen = []
    client = Client(base_url="http://api.test", transport=httpx.MockTransport(
        lambda r: seen.append(r.headers["Authorization"]) or answer(CANDLES)))
    client.candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-02")
    assert seen == [f"Bearer {KEY}"]
