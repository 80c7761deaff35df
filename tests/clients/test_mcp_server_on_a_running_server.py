"""The MCP server (`python -m marketdata.mcp`, clients/python's `mcp` extra) against a
running server with the seeded demo, in the mode the tests run in, driven by the MCP SDK's
own client over stdio (and once over streamable HTTP): every tool answers as the API does,
TOON by default and JSON on request with the same data, refusals of the API are tool
errors with the envelope's code and message, subscribe / unsubscribe refuse without
confirm=true and change the account's streams with it, and every call is metered."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager

import httpx
import pytest
import toon_format

from tests.api.demo_site import demo_server
from tests.integration.servers import ROOT, manage

from mcp import ClientSession  # the client's `mcp` extra, which `make install` installs
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

SUBSCRIBED = "binance/BTC/USDT"  # one of the demo account's paid streams
TODAY = dt.datetime.now(dt.timezone.utc).date()
START, END = (TODAY - dt.timedelta(days=6)).isoformat(), (TODAY - dt.timedelta(days=1)).isoformat()
SERIES = {"exchange": "binance", "symbol": "BTC-USDT", "start": START, "end": END}
HOUR_MS = 3_600_000
CLIENT_SRC = str(ROOT / "clients" / "python" / "src")  # this tree's client, whatever the venv points at
TOOLS = {"list_pairs", "top_tokens", "candlestick", "trades", "spread", "limit_orders", "snapshot", "live_bar",
         "stream_status", "scheme_events", "usage", "subscribe", "unsubscribe"}


@pytest.fixture
def demo(tmp_path):
    with demo_server(tmp_path) as (base, key, env):
        manage(env, "shell", "-c", (  # hourly (and so daily) history of the pair read here
            "import time\n"
            "from django.conf import settings\n"
            "from market.selectors import pair_get\n"
            "from market.services import history_seed\n"
            "pair = pair_get(exchange='binance', base='BTC', quote='USDT')\n"
            "history_seed(pairs=[pair], days=8, seed=settings.SIMULATOR_SEED, now_ms=int(time.time() * 1000))"))
        yield base, key


def server_env(base: str, key: str) -> dict[str, str]:
    return {"MARKETDATA_API_KEY": key, "MARKETDATA_BASE_URL": base,
            "PYTHONPATH": os.pathsep.join(filter(None, [CLIENT_SRC, os.environ.get("PYTHONPATH")]))}


@asynccontextmanager
async def stdio_session(base: str, key: str):
    params = StdioServerParameters(command=sys.executable, args=["-m", "marketdata.mcp"], env=server_env(base, key),
                                   cwd=str(ROOT))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def text_of(result) -> str:
    assert len(result.content) == 1, result
    return result.content[0].text


async def call(session, name: str, **arguments):
    """(TOON document, JSON document) of one tool call, both formats checked to agree."""
    toon = await session.call_tool(name, arguments)
    assert not toon.is_error, f"{name}: {text_of(toon)}"
    answer = await session.call_tool(name, {**arguments, "format": "json"})
    assert not answer.is_error, f"{name}: {text_of(answer)}"
    return toon_format.decode(text_of(toon)), json.loads(text_of(answer)), text_of(toon), text_of(answer)


async def refused(session, name: str, **arguments) -> str:
    result = await session.call_tool(name, arguments)
    assert result.is_error, f"{name} was not refused: {text_of(result)}"
    return text_of(result)


def raw(base, key, method, path, **kwargs):
    """The API's own JSON document, for comparison."""
    response = httpx.request(method, f"{base}/api/v1{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30,
                             **kwargs)
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def subscribed_pairs(base, key) -> dict[str, list[str]]:
    return {f"{p['exchange']}/{p['base']}/{p['quote']}": p["metrics"]
            for p in raw(base, key, "GET", "/streams")["pairs"] if p["subscribed"]}


async def every_tool(session, base, key):
    listed = (await session.list_tools()).tools
    tools = {tool.name: tool for tool in listed}
    assert set(tools) == TOOLS
    for tool in listed:  # a model can act on them: what it costs, and the units
        assert "quota" in tool.description, tool.name
        assert "format" in tool.input_schema["properties"], tool.name
    for name in ("subscribe", "unsubscribe"):
        assert "confirm" in tools[name].input_schema["properties"]
        assert "BILLING" in tools[name].description
        assert tools[name].annotations.read_only_hint is False
    assert tools["unsubscribe"].annotations.destructive_hint is True
    assert "does not count" in tools["usage"].description
    assert "24 h" in tools["snapshot"].description and "quote currency" in tools["candlestick"].description

    # finding pairs: the catalog (filtered here) and the ranking, as the API answers them
    catalog = raw(base, key, "GET", "/streams")["pairs"]
    in_toon, in_json, _, _ = await call(session, "list_pairs")
    assert in_toon == in_json
    assert [(p["exchange"], p["base"], p["quote"], p["subscribed"], p["metrics"]) for p in in_json["pairs"]] == [
        (p["exchange"], p["base"], p["quote"], p["subscribed"], p["metrics"]) for p in catalog]
    mine, _, _, _ = await call(session, "list_pairs", subscribed=True)
    assert {f"{p['exchange']}/{p['base']}/{p['quote']}" for p in mine["pairs"]} == set(subscribed_pairs(base, key))
    others, _, _, _ = await call(session, "list_pairs", exchange="kraken", subscribed=False)
    assert others["pairs"] and all(p["exchange"] == "kraken" and not p["subscribed"] for p in others["pairs"])
    unsubscribed = "{exchange}/{base}/{quote}".format(**others["pairs"][0])

    in_toon, in_json, _, _ = await call(session, "top_tokens", exchange="binance", n=5)
    assert in_toon == in_json
    ranking = raw(base, key, "GET", "/rank/top", params={"exchange": "binance", "n": 5})
    assert [(t["rank"], t["symbol"], t["pairs"]) for t in in_json["tokens"]] == [
        (t["rank"], t["symbol"], t["pairs"]) for t in ranking["tokens"]]

    # the series: the API's own document, TOON and JSON alike
    for name, endpoint, extra in (("candlestick", "candlestick", {}), ("trades", "trades", {}),
                                  ("spread", "spread", {"resolution": "hourly"}),
                                  ("limit_orders", "limit-orders", {}),
                                  ("limit_orders", "limit-orders", {"side": "bid_amount"})):
        in_toon, in_json, toon_text, json_text = await call(session, name, **SERIES, **extra)
        assert in_toon == in_json, name
        assert in_json == raw(base, key, "POST", f"/market/{endpoint}", json={**SERIES, **extra}), name
        assert len(in_json["data"]) == (6 * 24 if extra.get("resolution") == "hourly" else 6), name
        assert len(toon_text) < len(json_text), name
    assert set(in_json["data"][0]) == {"date", "bid_amount", "bid_notional", "bid_orders"}

    # the stream data of a subscribed pair
    to_ms = (int(time.time() * 1000) // HOUR_MS - 1) * HOUR_MS
    window = {"from_time": to_ms - 48 * HOUR_MS, "to_time": to_ms}
    in_toon, in_json, _, _ = await call(session, "snapshot", pair=SUBSCRIBED, metrics=["trade", "book", "quote"],
                                        granularity="hour", **window)
    assert in_toon == in_json
    expected = raw(base, key, "POST", f"/streams/{SUBSCRIBED}/snapshot",
                   json={"metrics": ["trade", "book", "quote"], "granularity": "hour", "from_ms": window["from_time"],
                         "to_ms": to_ms})
    assert in_json["bars"] == expected["bars"] and in_json["count"] == expected["count"]
    iso = {"from_time": dt.datetime.fromtimestamp(window["from_time"] / 1000, dt.timezone.utc).isoformat(),
           "to_time": dt.datetime.fromtimestamp(to_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    by_iso, _, _, _ = await call(session, "snapshot", pair=SUBSCRIBED, metrics=["trade", "book", "quote"],
                                 granularity="hour", **iso)
    assert by_iso == in_json  # ISO 8601 times are the same epoch ms

    in_toon, in_json, _, _ = await call(session, "live_bar", pair=SUBSCRIBED)
    assert in_toon == in_json and set(in_json) == {"bar"}
    assert (in_json["bar"] is None) == (raw(base, key, "GET", f"/streams/{SUBSCRIBED}/live") is None)
    in_toon, in_json, _, _ = await call(session, "stream_status", pair=SUBSCRIBED)
    assert in_toon["state"] == in_json["state"] and in_json["subscribed"] is True
    assert in_json["state"] in ("REQUESTED", "WARMING", "READY", "STALE", "FAILED")
    in_toon, in_json, _, _ = await call(session, "scheme_events", pair=SUBSCRIBED, lookback_hours=24)
    assert in_toon["events"] == in_json["events"] and in_json["end_ms"] >= in_json["start_ms"]
    assert [e["id"] for e in in_json["events"]] == [
        e["id"] for e in raw(base, key, "GET", f"/streams/{SUBSCRIBED}/schemes",
                             params={"lookback_hours": 24, "limit": 100})["events"]]

    # refusals of the API: tool errors with the envelope's status, code and message
    text = await refused(session, "snapshot", pair=unsubscribed, metrics=["trade"], granularity="hour")
    assert "402 payment_required" in text and "not_subscribed" in text and "request_id:" in text
    text = await refused(session, "candlestick", exchange="binance", symbol="NOPE-USDT", start=START, end=END)
    assert "400 invalid_parameter" in text and "symbol" in text
    text = await refused(session, "snapshot", pair=SUBSCRIBED, metrics=["trade"], granularity="second",
                         from_time=to_ms - 48 * HOUR_MS, to_time=to_ms)
    assert "400 invalid_parameter" in text
    assert "exchange/BASE/QUOTE" in await refused(session, "live_bar", pair="binance/BTC-USDT")

    # subscribe / unsubscribe: refused without confirm=true, and nothing changes
    before = subscribed_pairs(base, key)
    text = await refused(session, "subscribe", pair=unsubscribed)
    assert "confirm=true" in text and "pair-month" in text and "'pro' plan" in text
    text = await refused(session, "subscribe", pair=unsubscribed, confirm=False)
    assert "confirm=true" in text
    text = await refused(session, "unsubscribe", pair=SUBSCRIBED)
    assert "confirm=true" in text and SUBSCRIBED in text
    assert subscribed_pairs(base, key) == before

    # with confirm=true they do what they say, on a pair the demo does not stream
    result = await session.call_tool("subscribe", {"pair": unsubscribed, "metrics": ["trade"], "confirm": True})
    assert not result.is_error, text_of(result)
    subscription = toon_format.decode(text_of(result))
    assert subscription["metrics"] == ["trade"] and subscription["created"] is True
    assert subscribed_pairs(base, key) == {**before, unsubscribed: ["trade"]}
    in_toon, in_json, _, _ = await call(session, "stream_status", pair=unsubscribed)
    assert in_json["subscribed"] is True
    result = await session.call_tool("unsubscribe", {"pair": unsubscribed, "confirm": True, "format": "json"})
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == {"unsubscribed": unsubscribed, "metric": None}
    assert subscribed_pairs(base, key) == before

    # usage: free, and every call above went through the client to the API and was metered
    in_toon, in_json, _, _ = await call(session, "usage")
    assert in_toon["requests"] == in_json["requests"] and in_json["plan"] == "pro"
    endpoints = {line["endpoint"] for line in in_json["by_key_and_endpoint"]}
    assert {"POST /api/v1/market/candlestick", "GET /api/v1/streams", "POST /api/v1/streams"} <= endpoints
    assert in_json["streams"]["pairs"] == len(before)


# pytest-django makes the test database only for tests that ask for it where it can see
# it (a mark or a fixture argument, not getfixturevalue); in full mode the server uses it.
@pytest.mark.django_db(transaction=True)
def test_every_tool_over_stdio_and_streamable_http_answers_as_the_api(demo):
    base, key = demo

    async def run():
        async with stdio_session(base, key) as session:
            await every_tool(session, base, key)

    asyncio.run(run())
    over_streamable_http(base, key)


def test_a_missing_key_is_a_tool_error_not_a_dead_server():
    async def run():
        async with stdio_session("http://127.0.0.1:9", "") as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
            return await refused(session, "usage")

    assert "MARKETDATA_API_KEY" in asyncio.run(run())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def over_streamable_http(base, key):
    """`--transport streamable-http --port N`: the same tools at http://127.0.0.1:N/mcp."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "marketdata.mcp", "--transport", "streamable-http",
                                "--port", str(port)], cwd=ROOT, env={**os.environ, **server_env(base, key)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the MCP server did not start"
                time.sleep(0.1)

        async def run():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
                    return await call(session, "candlestick", **SERIES)

        in_toon, in_json, _, _ = asyncio.run(run())
        assert in_toon == in_json == raw(base, key, "POST", "/market/candlestick", json=SERIES)
    finally:
        process.terminate()
        process.wait(timeout=10)
