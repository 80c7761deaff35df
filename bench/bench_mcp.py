"""The MCP server's answers (`python -m marketdata.mcp`, the Python client's `mcp` extra):
for each tool, the bytes of a typical answer in TOON (the default) against JSON
(`format="json"`, compact separators), on a running demo server, driven over stdio by the
MCP SDK's own client.

    python bench/bench_mcp.py

The server is one daphne process on a fresh SQLite database with the demo seeded and 40
days of history of binance/BTC/USDT (BENCH_DATABASE_URL / BENCH_REDIS_URL for PostgreSQL
and Redis). Bytes are the UTF-8 length of the tool's text answer, what a model reads.
subscribe / unsubscribe run with confirm=true on a pair the demo does not stream (TOON
first: it subscribes, and the JSON call finds it held; unsubscribe then drops it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOUR_MS = 3_600_000


def typical_calls(unsubscribed: str) -> list[tuple[str, str, dict]]:
    """(label, tool, arguments) of a typical call of every tool."""
    today = datetime.now(timezone.utc).date()
    series = {"exchange": "binance", "symbol": "BTC-USDT", "start": (today - timedelta(days=31)).isoformat(),
              "end": (today - timedelta(days=1)).isoformat()}
    to_ms = (int(time.time() * 1000) // HOUR_MS - 1) * HOUR_MS
    pair = "binance/BTC/USDT"
    return [
        ("list_pairs (the catalog)", "list_pairs", {}),
        ("top_tokens binance n=10", "top_tokens", {"exchange": "binance", "n": 10}),
        ("candlestick 31 days", "candlestick", series),
        ("trades 31 days", "trades", series),
        ("spread 31 days", "spread", series),
        ("limit_orders 31 days", "limit_orders", series),
        ("limit_orders 31 days, side=bid_amount", "limit_orders", {**series, "side": "bid_amount"}),
        ("snapshot 24 hour bars, trade+book+quote", "snapshot",
         {"pair": pair, "metrics": ["trade", "book", "quote"], "granularity": "hour", "from_time": to_ms - 24 * HOUR_MS,
          "to_time": to_ms}),
        ("live_bar", "live_bar", {"pair": pair}),
        ("stream_status", "stream_status", {"pair": pair}),
        ("scheme_events 24 h", "scheme_events", {"pair": pair}),
        ("usage", "usage", {}),
        ("subscribe (confirm=true)", "subscribe", {"pair": unsubscribed, "confirm": True}),
        ("unsubscribe (confirm=true)", "unsubscribe", {"pair": unsubscribed, "confirm": True}),
    ]


async def measure(base: str, key: str) -> list[tuple[str, int, int]]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {"MARKETDATA_API_KEY": key, "MARKETDATA_BASE_URL": base,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "clients" / "python" / "src"),
                                                       os.environ.get("PYTHONPATH")]))}
    params = StdioServerParameters(command=sys.executable, args=["-m", "marketdata.mcp"], env=env, cwd=str(ROOT))
    rows = []
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                catalog = await session.call_tool("list_pairs", {"subscribed": False, "format": "json"})
                other = json.loads(catalog.content[0].text)["pairs"][0]
                unsubscribed = f"{other['exchange']}/{other['base']}/{other['quote']}"
                for label, tool, arguments in typical_calls(unsubscribed):
                    sizes = []
                    for format in ("toon", "json"):
                        result = await session.call_tool(tool, {**arguments, "format": format})
                        text = result.content[0].text
                        assert not result.is_error, f"{tool}: {text}"
                        sizes.append(len(text.encode("utf-8")))
                    rows.append((label, *sizes))
    return rows


def _server_env() -> dict[str, str]:
    from bench.bench_client import _server_env as client_bench_env

    return client_bench_env()


def run() -> list[dict]:
    from tests.integration.servers import daphne_processes

    env = _server_env()
    key = env.pop("KEY")
    serving = {**env, "INGESTION_AUTOSTART": "false", "INGESTION_IN_PROCESS": "false"}
    with daphne_processes(1, env=serving) as (base,):
        measured = asyncio.run(measure(base, key))
    return [{"figure": f"MCP tool answer bytes, {label}: TOON vs JSON", "value": f"{toon} vs {js} B",
             "comparison": f"TOON is {toon / js:.0%} of JSON", "goal": None, "met": None, "label": label,
             "toon": toon, "json": js} for label, toon, js in measured]


if __name__ == "__main__":
    rows = run()
    width = max(len(row["label"]) for row in rows)
    print(f"{'tool call':<{width}}  {'TOON B':>8}  {'JSON B':>8}  TOON/JSON")
    for row in rows:
        print(f"{row['label']:<{width}}  {row['toon']:>8}  {row['json']:>8}  {row['toon'] / row['json']:>8.0%}")
    toon, js = sum(row["toon"] for row in rows), sum(row["json"] for row in rows)
    print(f"{'all of the above':<{width}}  {toon:>8}  {js:>8}  {toon / js:>8.0%}")
