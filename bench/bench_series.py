"""Series endpoints through the full stack (daphne, key auth, plan check, metering)
against a bare Django JSON view on the same server, in one run.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_REDIS_URL=redis://127.0.0.1:6379/0 \
        python bench/bench_series.py
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_metering import CLIENTS, ROUNDS, SECONDS, _database, _load, seed_demo_key  # noqa: E402


def run() -> list[dict]:
    from tests.integration.servers import daphne_processes

    database_url, drop = _database(os.environ.get("BENCH_DATABASE_URL"))
    redis_url = os.environ.get("BENCH_REDIS_URL", os.environ.get("REDIS_URL", ""))
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "tests.integration.settings"}
    try:
        key = seed_demo_key(env, history_days=400)
        import httpx

        with daphne_processes(1, env=env) as (base,):
            bodies = {
                "candlestick 31 days": {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-09-01",
                                        "end": "2026-10-01"},
                "candlestick hourly 30 days": {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-09-01",
                                               "end": "2026-09-30", "resolution": "hourly"},
            }
            results = {}
            for name, body in bodies.items():
                response = httpx.post(f"{base}/api/v1/market/candlestick", json=body,
                                      headers={"Authorization": f"Bearer {key}"})
                assert response.status_code == 200, response.text
                rows = response.json()["meta"]["count"]
                rates = [_load((f"{base}/api/v1/market/candlestick", body), key, SECONDS) / SECONDS
                         for _ in range(ROUNDS)]
                results[name] = (statistics.median(rates), rows)
            bare = statistics.median([_load(f"{base}/api/v1/test/bare", key, SECONDS) / SECONDS for _ in range(ROUNDS)])
    finally:
        drop()
    db = "PostgreSQL" if "postgres" in database_url else "SQLite"
    return [{"figure": f"{name} ({rows} rows), full stack, {db}, 1 daphne, {CLIENTS} clients",
             "value": f"{rate:.0f} req/s", "comparison": f"bare Django JsonResponse {bare:.0f} req/s",
             "goal": "report", "met": None} for name, (rate, rows) in results.items()]


if __name__ == "__main__":
    for row in run():
        print(row)
