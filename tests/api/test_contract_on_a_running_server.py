"""Four answers settled by SPEC.md and written into docs/API.md, on a running server with
the seeded demo. In full mode each request also goes to a second server with the event
loop's answers off (config/loop.py): the loop path and the view it shortcuts answer alike."""

from contextlib import ExitStack

import httpx
import pytest

from tests.api.demo_site import demo_server, on_postgres

UNSUBSCRIBED = "kraken/ADA/USD"  # a pair the demo account does not stream
SUBSCRIBED = "binance/BTC/USDT"


@pytest.fixture
def servers(request, tmp_path):
    """[(base, key)]: the demo server, and in full mode the same database served without
    the loop's answers."""
    if on_postgres():
        request.getfixturevalue("transactional_db")
    with ExitStack() as stack:
        base, key, env = stack.enter_context(demo_server(tmp_path))
        bases = [base]
        if on_postgres():
            from tests.integration.servers import daphne_processes

            (plain,) = stack.enter_context(daphne_processes(1, env={
                **env, "INGESTION_AUTOSTART": "false", "INGESTION_IN_PROCESS": "false", "DB_LOOP_POOL_MAX": "0"}))
            bases.append(plain)
        yield [(b, key) for b in bases]


def ask(servers, method: str, path: str, *, key: bool = True, **kwargs) -> httpx.Response:
    """The answer of every server, which must agree (status, body but the request id); the first."""
    answers = []
    for base, api_key in servers:
        headers = {"Authorization": f"Bearer {api_key}"} if key else {}
        answers.append(httpx.request(method, f"{base}{path}", headers=headers, timeout=30, **kwargs))
    def comparable(response):
        body = response.json() if response.content else None
        if isinstance(body, dict) and "error" in body:
            body["error"].pop("request_id")
        return response.status_code, body
    assert len({repr(comparable(a)) for a in answers}) == 1, [(a.status_code, a.text[:200]) for a in answers]
    return answers[0]


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_a_key_in_the_query_string_without_the_header_is_401_telling_to_send_the_header(servers):
    key = servers[0][1]
    for method, path, body in (("GET", "/api/v1/me/usage", None), ("GET", "/v1/me/usage", None),
                               ("POST", "/api/v1/market/candlestick", {"exchange": "binance", "symbol": "BTC-USDT",
                                                                       "start": "2026-10-01", "end": "2026-10-02"}),
                               ("GET", f"/api/v1/streams/{SUBSCRIBED}/status", None)):
        response = ask(servers, method, f"{path}?api_key={key}", key=False, json=body)
        error = error_of(response, 401)
        assert error["code"] == "unauthorized" and error["details"] == {"parameter": "api_key"}
        assert "Authorization: Bearer" in error["message"], error
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    # with the header as well, the query's api_key is an unknown parameter like any other
    error = error_of(ask(servers, "GET", f"/api/v1/me/usage?api_key={key}"), 400)
    assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == "api_key"
    # the live feed: no header, no key
    error = error_of(ask(servers, "GET", f"/api/v1/streams/{SUBSCRIBED}/events?api_key={key}", key=False), 401)
    assert error["code"] == "unauthorized"


@pytest.mark.parametrize("body, parameter", [
    ({"exchange": "binance", "symbol": "FOO-BAR"}, "symbol"),
    ({"exchange": "binance", "symbol": "BTC-EUR"}, "symbol"),  # listed elsewhere (kraken), not on binance
    ({"exchange": "nowhere", "symbol": "BTC-USDT"}, "exchange")])
def test_an_unknown_pair_in_a_series_body_is_400_naming_the_parameter(servers, body, parameter):
    for endpoint in ("candlestick", "limit-orders", "trades", "spread"):
        response = ask(servers, "POST", f"/api/v1/market/{endpoint}",
                       json={**body, "start": "2026-10-01", "end": "2026-10-02"})
        error = error_of(response, 400)
        assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == parameter, error


def test_the_stream_data_of_a_pair_the_account_does_not_subscribe_is_402_saying_how_to_subscribe(servers):
    snapshot = {"metrics": ["trade"], "granularity": "minute", "from_ms": 1_790_000_000_000,
                "to_ms": 1_790_003_600_000}  # a fixed window: both servers' answers alike
    for method, action, body in (("GET", "status", None), ("GET", "live", None), ("POST", "token", None),
                                 ("POST", "snapshot", snapshot), ("GET", "events", None)):
        error = error_of(ask(servers, method, f"/api/v1/streams/{UNSUBSCRIBED}/{action}", json=body), 402)
        assert error["code"] == "payment_required", error
        assert error["details"] == {"reason": "not_subscribed", "pair": UNSUBSCRIBED}
        assert "POST /api/v1/streams" in error["message"]
    status = ask(servers, "GET", f"/api/v1/streams/{SUBSCRIBED}/status").json()
    assert status["subscribed"] is True and status["state"] in ("REQUESTED", "WARMING", "READY", "STALE", "FAILED")
    assert ask(servers, "GET", f"/api/v1/streams/{SUBSCRIBED}/live").status_code == 200
    assert ask(servers, "POST", f"/api/v1/streams/{SUBSCRIBED}/snapshot", json=snapshot).status_code == 200
    token = httpx.post(f"{servers[0][0]}/api/v1/streams/{SUBSCRIBED}/token", timeout=30,
                       headers={"Authorization": f"Bearer {servers[0][1]}"})  # a token differs per request
    assert token.status_code == 200 and "?token=" in token.json()["events_url"]


def test_a_stream_path_with_the_series_symbol_form_is_404_naming_the_path_to_use(servers):
    for method, action in (("GET", "status"), ("DELETE", "status"), ("POST", "snapshot"), ("GET", "live"),
                           ("POST", "token"), ("GET", "schemes"), ("GET", "events")):
        response = ask(servers, method, f"/api/v1/streams/binance/BTC-USDT/{action}",
                       json={"metrics": ["trade"], "granularity": "minute"} if action == "snapshot" else None)
        error = error_of(response, 404)
        assert error["code"] == "not_found"
        assert error["details"]["use"] == f"/api/v1/streams/binance/BTC/USDT/{action}", error
        assert f"/api/v1/streams/binance/BTC/USDT/{action}" in error["message"]
