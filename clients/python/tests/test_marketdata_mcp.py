"""The MCP server's tools without a server: the client on httpx.MockTransport. What the
API is asked, what the model reads back (TOON and JSON of the same document), refusals as
tool errors with the envelope, and subscribe / unsubscribe sending nothing without confirm.
The same tools against a running server: tests/clients/test_mcp_server_on_a_running_server.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import toon_format

pytest.importorskip("mcp", reason="the `mcp` extra is not installed")

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from marketdata import AsyncClient  # noqa: E402
from marketdata.mcp.server import build_server, epoch_ms  # noqa: E402

KEY = "mdp_live_" + "a" * 50
CANDLES = {"meta": {"source_type": "exchange", "source": "binance", "symbol": "BTC-USDT", "metric_type": "candlestick",
                    "sides": ["ohlc"], "resolution": "daily", "start": "2026-10-01", "end": "2026-10-02", "count": 2},
           "data": [{"date": "2026-10-01", "open": 1.5, "high": 2.0, "low": 1.0, "close": 1.75, "observation_count": 3,
                     "price_sum": 5.25, "price_variance": 0.1},
                    {"date": "2026-10-02", "open": 1.75, "high": 2.5, "low": 1.5, "close": 2.0,
                     "observation_count": 4, "price_sum": 8.0, "price_variance": 0.2}]}
USAGE = {"period": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"}, "plan": "pro",
         "requests": {"used": 3, "limit": 100, "remaining": 97}, "bytes": {"used": 10, "limit": 1000, "remaining": 990},
         "streams": {"pairs": 2}, "by_key_and_endpoint": []}


def server_with(handler):
    requests: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return handler(request)

    client = AsyncClient(KEY, "http://api.test", format="json", transport=httpx.MockTransport(record))
    return build_server(client), requests


def call(server, name, **arguments) -> str:
    result = asyncio.run(server.call_tool(name, arguments))
    assert not result.is_error, result
    return result.content[0].text


def refusal(server, name, **arguments) -> str:
    with pytest.raises(ToolError) as refused:
        asyncio.run(server.call_tool(name, arguments))
    return str(refused.value)


def test_a_series_in_toon_by_default_and_json_on_request_is_the_apis_document():
    server, requests = server_with(lambda request: httpx.Response(200, json=CANDLES))
    arguments = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-10-01", "end": "2026-10-02"}
    toon = call(server, "candlestick", **arguments)
    assert "data[2]{date,open,high,low,close,observation_count,price_sum,price_variance}:" in toon
    assert toon_format.decode(toon) == json.loads(call(server, "candlestick", **arguments, format="json")) == CANDLES
    assert json.loads(requests[0].content) == arguments  # options not given are not sent
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_an_api_refusal_is_a_tool_error_with_the_envelope():
    envelope = {"error": {"code": "payment_required", "message": "Subscribe to kraken/ADA/USD first",
                          "details": {"reason": "not_subscribed", "pair": "kraken/ADA/USD"}, "request_id": "r-1"}}
    server, _ = server_with(lambda request: httpx.Response(402, json=envelope))
    text = refusal(server, "live_bar", pair="kraken/ADA/USD")
    assert "API error 402 payment_required: Subscribe to kraken/ADA/USD first" in text
    assert '"reason": "not_subscribed"' in text and "request_id: r-1" in text


def test_subscribe_and_unsubscribe_send_nothing_billed_without_confirm():
    server, requests = server_with(lambda request: httpx.Response(200, json=USAGE))
    for name in ("subscribe", "unsubscribe"):
        text = refusal(server, name, pair="kraken/ADA/USD")
        assert "confirm=true" in text and "'pro' plan" in text and "2 pair(s)" in text
    assert {(r.method, r.url.path) for r in requests} == {("GET", "/api/v1/me/usage")}  # free, not metered


def test_subscribe_and_unsubscribe_with_confirm():
    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(201, json={**json.loads(request.content), "metrics": ["trade"], "state": "REQUESTED"})
        return httpx.Response(204)

    server, requests = server_with(answer)
    subscribed = json.loads(call(server, "subscribe", pair="kraken/ADA/USD", metrics=["trade"], confirm=True,
                                 format="json"))
    assert subscribed["created"] is True and subscribed["metrics"] == ["trade"]
    assert toon_format.decode(call(server, "unsubscribe", pair="kraken/ADA/USD", metric="book", confirm=True)) == {
        "unsubscribed": "kraken/ADA/USD", "metric": "book"}
    assert [(r.method, r.url.path, r.url.query) for r in requests] == [
        ("POST", "/api/v1/streams", b""), ("DELETE", "/api/v1/streams/kraken/ADA/USD", b"metric=book")]


def test_snapshot_times_in_epoch_ms_or_iso_8601():
    assert epoch_ms(1764288000000, "t") == epoch_ms("1764288000000", "t") == 1764288000000
    assert epoch_ms("2025-11-28T00:00:00Z", "t") == epoch_ms("2025-11-28T00:00:00", "t") == 1764288000000
    assert epoch_ms("2025-11-28T01:00:00+01:00", "t") == 1764288000000
    with pytest.raises(ToolError):
        epoch_ms("yesterday", "t")


def test_arguments_out_of_range_are_refused_before_any_request():
    server, requests = server_with(lambda request: httpx.Response(200, json={}))
    refusal(server, "scheme_events", pair="binance/BTC/USDT", lookback_hours=0)
    refusal(server, "top_tokens", exchange="binance", n=251)
    refusal(server, "candlestick", exchange="binance", symbol="BTC-USDT", start="2026-10-01", end="2026-10-02",
            format="xml")
    assert requests == []
