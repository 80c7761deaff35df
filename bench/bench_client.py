"""The Python client's own cost on a series call: `Client.candlestick` (31 daily rows)
against a bare httpx call of the same request on the same running server, in one run, in
JSON and in TOON. Median wall microseconds per call over N calls each, the paths taking
turns call by call (in a rotating order: the server finishes counting a request after
answering it, which delays whichever call comes next) so that a drift of the machine
weighs on all of them alike, and the
client process's CPU per call (the server is another process: this is the client's cost
without the server's noise).

    python bench/bench_client.py            # N=400 calls a path; BENCH_CLIENT_CALLS=N to change

The server is one daphne process on a fresh SQLite database with the demo seeded
(BENCH_DATABASE_URL / BENCH_REDIS_URL for PostgreSQL and Redis). "bare httpx" sends the
request and reads the body; "bare httpx + decode" also parses it (json.loads or
toon_format.decode), which any caller must do; the client adds to that the typed result
(the row types, the meta, the quota headers) and the error check.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CALLS = int(os.environ.get("BENCH_CLIENT_CALLS", "400"))
WARMUP = 30


def _server_env() -> dict[str, str]:
    from tests.integration.servers import manage

    database_url = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{tempfile.mkdtemp(prefix='bench-client-')}/db.sqlite3"
    env = {"DATABASE_URL": database_url, "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "")}
    manage(env, "migrate", "--noinput", "-v0")
    printed = manage(env, "seed_demo", "--base-url", "http://127.0.0.1", "--history-days", "0")
    manage(env, "shell", "-c", (
        "import time\n"
        "from django.conf import settings\n"
        "from market.selectors import pair_get\n"
        "from market.services import history_seed\n"
        "pair = pair_get(exchange='binance', base='BTC', quote='USDT')\n"
        "history_seed(pairs=[pair], days=40, seed=settings.SIMULATOR_SEED, now_ms=int(time.time() * 1000))"))
    import re

    env["KEY"] = re.search(r"mdp_live_[0-9A-Za-z]{50}", printed).group(0)
    return env


def measure(base: str, key: str) -> dict[str, dict[str, float]]:
    """{format: {path: median µs per call}}."""
    import httpx
    import toon_format

    from marketdata import Client

    today = datetime.now(timezone.utc).date()
    start, end = today - timedelta(days=32), today - timedelta(days=2)  # ended days: 31 rows
    body = {"exchange": "binance", "symbol": "BTC-USDT", "start": start.isoformat(), "end": end.isoformat()}
    results: dict[str, dict[str, float]] = {}
    for format, media_type, decode in (("json", "application/json", json.loads),
                                       ("toon", "application/toon", lambda b: toon_format.decode(b.decode()))):
        bare = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}", "Accept": media_type})
        client = Client(key, base, format=format)

        def bare_call():
            response = bare.post("/api/v1/market/candlestick", json=body)
            assert response.status_code == 200
            return response.content

        def bare_decoded():
            return decode(bare_call())

        def client_call():
            series = client.candlestick("binance", "BTC-USDT", start, end)
            assert len(series) == 31
            return series

        paths = {"bare httpx": bare_call, "bare httpx + decode": bare_decoded, "marketdata.Client": client_call}
        assert decode(bare_call())["data"] == [dict(r) for r in client_call().rows] or format == "toon"
        for call in paths.values():
            for _ in range(WARMUP):
                call()
        timings: dict[str, list[float]] = {name: [] for name in paths}
        cpu: dict[str, float] = dict.fromkeys(paths, 0.0)
        order = list(paths.items())
        for n in range(CALLS):  # one call of each path in turn, the turn rotating: none always follows another
            for name, call in order[n % 3:] + order[:n % 3]:
                started, started_cpu = time.perf_counter(), time.process_time()
                call()
                cpu[name] += time.process_time() - started_cpu
                timings[name].append((time.perf_counter() - started) * 1e6)
        results[format] = {name: statistics.median(values) for name, values in timings.items()}
        results[format].update({f"{name} cpu": cpu[name] / CALLS * 1e6 for name in paths})
        bare.close()
        client.close()
    return results


def run() -> list[dict]:
    from tests.integration.servers import daphne_processes

    env = _server_env()
    key = env.pop("KEY")
    serving = {**env, "INGESTION_AUTOSTART": "false", "INGESTION_IN_PROCESS": "false"}
    with daphne_processes(1, env=serving) as (base,):
        results = measure(base, key)
    rows = []
    for format, paths in results.items():
        bare, decoded, client = paths["bare httpx"], paths["bare httpx + decode"], paths["marketdata.Client"]
        bare_cpu, decoded_cpu, client_cpu = (paths[f"{name} cpu"] for name in
                                             ("bare httpx", "bare httpx + decode", "marketdata.Client"))
        rows.append({"figure": f"Python client candlestick 31 days, {format.upper()}: client vs bare httpx (µs/call, "
                               f"median of {CALLS}, wall; client process CPU per call)",
                     "value": f"wall {client:.0f} vs {bare:.0f} µs (+{client - bare:.0f} µs); "
                              f"CPU {client_cpu:.0f} vs {bare_cpu:.0f} µs (+{client_cpu - bare_cpu:.0f} µs)",
                     "comparison": f"bare httpx + decode: wall {decoded:.0f} µs, CPU {decoded_cpu:.0f} µs "
                                   f"(the client's own work beyond decoding: CPU +{client_cpu - decoded_cpu:.0f} µs)",
                     "goal": None, "met": None})
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row['figure']}: {row['value']}; {row['comparison']}")
