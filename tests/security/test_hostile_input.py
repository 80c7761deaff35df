"""Oversized bodies and absurd ranges are refused early, in the envelope, never with a 5xx
or a memory blow-up. (Generated input over every operation: test_fuzz_openapi.py.)"""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import orjson
import pytest
from django.conf import settings

from .conftest import account_state, api_paths, seed_recent_bars

PAIR = "/api/v1/streams/binance/BTC/USDT"
BODY_METHODS = ("post", "put", "patch", "delete")


def assert_envelope(response, status: int, code: str, parameter: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == code, error
    assert isinstance(error["details"], dict) and error["message"]
    assert error["request_id"] == response["X-Request-Id"]
    if parameter is not None:
        assert error["details"].get("parameter") == parameter, error
    return error


@pytest.fixture
def a_api(two_customers, client_for):
    a, _ = two_customers
    return client_for(a.key)


# -- oversized bodies -----------------------------------------------------------------------

def test_a_body_over_the_limit_is_413_on_every_api_route_and_method_before_anything_runs(
        two_customers, a_api, client):
    a, b = two_customers
    paths = sorted(set(api_paths()) | {f"{PAIR}/events"})
    assert "/api/v1/streams" in paths and f"{PAIR}/snapshot" in paths and "/v1/me/usage" in paths
    before = account_state(a.account), account_state(b.account)
    oversized = b"{" + b" " * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b"}"
    for path in paths:
        for method in BODY_METHODS:
            for caller in (a_api, client):  # with a valid key and with none
                response = getattr(caller, method)(path, data=oversized, content_type="application/json")
                error = assert_envelope(response, 413, "payload_too_large")
                assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in error["message"]
    # refused before authentication, metering and the view: nothing counted, nothing changed
    assert (account_state(a.account), account_state(b.account)) == before


def test_a_body_at_the_limit_is_read_and_answered(a_api):
    padding = settings.DATA_UPLOAD_MAX_MEMORY_SIZE - 200
    # padded with whitespace: an unknown field would be refused (400 naming it)
    body = orjson.dumps({"exchange": "binance", "base": "BTC", "quote": "USDT"})[:-1] + b" " * padding + b"}"
    assert len(body) <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = a_api.post("/api/v1/streams", data=body, content_type="application/json")
    assert response.status_code == 200, response.content[:300]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "no-content-length"])
@pytest.mark.django_db(transaction=True)
def test_a_32_mib_upload_to_the_asgi_server_is_refused_without_holding_it_in_memory(
        asgi_application, two_customers, declared):
    """Through the ASGI entry point daphne serves. With a declared Content-Length over the
    limit the answer is 413; a body sent without one is never parsed (the request reads as
    empty: 400). Either way the server spools at most Django's in-memory upload size."""
    a, _ = two_customers
    chunk, chunks = b"x" * 65_536, 512  # 32 MiB, one 64 KiB object sent 512 times
    headers = [(b"authorization", f"Bearer {a.key}".encode()), (b"content-type", b"application/json"),
               (b"host", b"testserver")]
    if declared:
        headers.append((b"content-length", str(len(chunk) * chunks).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/api/v1/streams", "raw_path": b"/api/v1/streams", "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 5000), "server": ("testserver", 80)}
    sent = {"n": 0}
    answer = {"status": None, "body": b"", "headers": {}}

    async def receive():
        if sent["n"] < chunks:
            sent["n"] += 1
            return {"type": "http.request", "body": chunk, "more_body": sent["n"] < chunks}
        await asyncio.sleep(3600)

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        else:
            answer["body"] += message.get("body", b"")

    tracemalloc.start()
    try:
        started = time.monotonic()
        asyncio.run(asyncio.wait_for(asgi_application(scope, receive, send), timeout=60))
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    error = orjson.loads(answer["body"])["error"]
    assert answer["status"] == (413 if declared else 400), answer
    assert error["code"] == ("payload_too_large" if declared else "invalid_parameter")
    assert error["request_id"] == answer["headers"]["x-request-id"]
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB for a 32 MiB body"
    assert elapsed < 30


# -- absurd ranges and values ---------------------------------------------------------------

HUGE = "9" * 5000  # past Python's 4300-digit int() guard
ABSURD_QUERIES = [
    *[(f"{PAIR}/schemes?limit={v}", "limit") for v in
      ("99", "50001", "0", "-1", "1000000000000000000000", HUGE, "abc", "1e3", "100.5", "%00", "NaN", "")[:-1]],
    *[(f"{PAIR}/schemes?lookback_hours={v}", "lookback_hours") for v in
      ("0", "721", "-24", "99999999999999999999", HUGE, "24h", "Infinity", "0x10")],
    *[(f"/api/v1/rank/top?exchange=binance&n={v}", "n") for v in
      ("0", "251", "-5", "10000000000000000000000", HUGE, "ten", "1.0e2")],
    ("/api/v1/rank/top?exchange=" + "b" * 5000, "exchange"),
    (f"/api/v1/rank/top?exchange=binance&format={'x' * 5000}", "format"),
    (f"{PAIR}/status?format=xml", "format"),
]


@pytest.mark.parametrize("url, parameter", ABSURD_QUERIES)
def test_absurd_query_values_are_400_naming_the_parameter(a_api, url, parameter):
    started = time.monotonic()
    response = a_api.get(url)
    assert_envelope(response, 400, "invalid_parameter", parameter)
    assert time.monotonic() - started < 2


def test_an_unknown_metric_on_unsubscribe_is_400(a_api):
    assert_envelope(a_api.delete(f"{PAIR}?metric=everything"), 400, "invalid_parameter", "metric")


DAY_MS, MAX_MS = 86_400_000, 253_402_300_799_999
ABSURD_SNAPSHOTS = [
    ({"granularity": "second", "from_ms": -1, "to_ms": 1000}, "from_ms"),
    ({"granularity": "second", "to_ms": -DAY_MS}, "to_ms"),
    ({"granularity": "second", "from_ms": 0, "to_ms": MAX_MS + 1}, "to_ms"),
    ({"granularity": "hour", "from_ms": 10**19, "to_ms": 10**19}, "to_ms"),
    ({"granularity": "hour", "from_ms": 1e300, "to_ms": 1e300}, "to_ms"),
    ({"granularity": "hour", "from_ms": 1.5, "to_ms": 2}, "from_ms"),
    ({"granularity": "hour", "from_ms": "soon", "to_ms": 2}, "from_ms"),
    ({"granularity": "hour", "from_ms": True, "to_ms": 2}, "from_ms"),
    ({"granularity": "hour", "from_ms": [1], "to_ms": 2}, "from_ms"),
    ({"granularity": "hour", "from_ms": 2_000, "to_ms": 1_000}, "from_ms"),
    ({"granularity": "second", "from_ms": 0, "to_ms": DAY_MS + 1}, "to_ms"),
    ({"granularity": "minute", "from_ms": 0, "to_ms": 7 * DAY_MS + 1}, "to_ms"),
    ({"granularity": "hour", "from_ms": 0, "to_ms": 30 * DAY_MS + 1}, "to_ms"),
    ({"granularity": "day", "from_ms": 0, "to_ms": 366 * DAY_MS + 1}, "to_ms"),
    ({"granularity": "day", "from_ms": 0, "to_ms": MAX_MS}, "to_ms"),
    ({"granularity": "fortnight"}, "granularity"),
    ({"granularity": "day", "metrics": ["book"]}, "granularity"),
    ({"granularity": "hour", "metrics": []}, "metrics"),
    ({"granularity": "hour", "metrics": ["trade"] * 5_000 + ["bogus"]}, "metrics"),
    ({"granularity": "hour", "metrics": "trade"}, "metrics"),
]


@pytest.mark.parametrize("body, parameter", ABSURD_SNAPSHOTS)
def test_absurd_snapshot_ranges_are_400_naming_the_parameter(a_api, body, parameter):
    body = {"metrics": ["trade"], **body}
    started = time.monotonic()
    response = a_api.post(f"{PAIR}/snapshot", body, format="json")
    assert_envelope(response, 400, "invalid_parameter", parameter)
    assert time.monotonic() - started < 2


def test_integers_beyond_64_bits_in_a_body_are_400(a_api):
    raw = b'{"metrics": ["trade"], "granularity": "hour", "from_ms": ' + b"9" * 400 + b"}"
    response = a_api.post(f"{PAIR}/snapshot", data=raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] in ("invalid_json", "invalid_parameter")


SERIES = {"exchange": "binance", "symbol": "BTC-USDT"}
ABSURD_SERIES = [
    ("candlestick", {"start": "99999-01-01", "end": "99999-01-02"}, "start"),
    ("candlestick", {"start": "2024-01-01", "end": "99999-12-31"}, "end"),
    ("candlestick", {"start": "2024-13-01", "end": "2024-13-02"}, "start"),
    ("candlestick", {"start": "2024-1-1", "end": "2024-1-2"}, "start"),
    ("candlestick", {"start": "-2024-01-01", "end": "2024-01-02"}, "start"),
    ("candlestick", {"start": 20240101, "end": "2024-01-02"}, "start"),
    ("candlestick", {"start": "2024-02-01", "end": "2024-01-01"}, "end"),
    ("candlestick", {"start": "0001-01-01", "end": "9999-12-31"}, "end"),
    ("candlestick", {"start": "2000-01-01", "end": "2024-01-01"}, "end"),
    ("trades", {"start": "2024-01-01", "end": "2024-12-31", "resolution": "hourly"}, "end"),
    ("spread", {"start": "2024-01-01", "end": "2024-01-02", "resolution": "minutely"}, "resolution"),
    ("limit-orders", {"start": "2024-01-01", "side": "both" * 50}, "side"),
    ("limit-orders", {"start": "2024-01-01", "symbol": "BTC-USDT-ETH"}, "symbol"),
    ("limit-orders", {"start": "2024-01-01", "symbol": "B" * 5000}, "symbol"),
    ("limit-orders", {"start": "2024-01-01", "exchange": {"$ne": None}}, "exchange"),
]


@pytest.mark.parametrize("endpoint, body, parameter", ABSURD_SERIES)
def test_absurd_series_dates_and_values_are_400_naming_the_parameter(a_api, endpoint, body, parameter):
    started = time.monotonic()
    response = a_api.post(f"/api/v1/market/{endpoint}", {**SERIES, **body}, format="json")
    assert_envelope(response, 400, "invalid_parameter", parameter)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("endpoint, body", [
    ("candlestick", {"start": "9999-12-31", "end": "9999-12-31"}),
    ("limit-orders", {"start": "9999-12-31"}),
    ("trades", {"start": "9999-12-30", "end": "9999-12-31", "resolution": "hourly"}),
    ("spread", {"start": "0001-01-01", "end": "0001-01-01"}),
])
def test_the_first_and_last_days_of_the_calendar_are_empty_series_not_500(a_api, endpoint, body):
    """Regression: a series ending on 9999-12-31 used to overflow `end + 1 day` (500)."""
    response = a_api.post(f"/api/v1/market/{endpoint}", {**SERIES, **body}, format="json")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["meta"]["count"] == 0


def test_the_widest_allowed_snapshot_of_real_data_is_answered(a_api, catalog):
    seed_recent_bars(catalog["binance/BTC/USDT"], hours=2)
    response = a_api.post(f"{PAIR}/snapshot", {"metrics": ["trade", "book", "quote"], "granularity": "minute",
                                               "from_ms": 0, "to_ms": 7 * DAY_MS}, format="json")
    assert response.status_code == 200
    response = a_api.post(f"{PAIR}/snapshot", {"metrics": ["trade", "book", "quote"],
                                               "granularity": "minute"}, format="json")
    assert response.status_code == 200 and response.json()["count"] > 0


def test_a_204_has_no_body(a_api):
    """Regression: DELETE /streams/... answered 204 with the body `null`, which HTTP forbids
    (clients that read by the book fail on it)."""
    for url in (PAIR, f"{PAIR}?metric=book", "/api/v1/streams/nowhere/FOO/BAR"):
        for accept in ("application/json", "application/toon"):
            response = a_api.delete(url, HTTP_ACCEPT=accept)
            assert response.status_code == 204
            assert response.content == b""
    assert a_api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT"},
                      format="json").status_code in (200, 201)
    live = a_api.get(f"{PAIR}/live")  # the one place JSON null is a body
    assert live.status_code == 200 and live.content == b"null"
