"""Counted series requests and /me/usage through the full stack (daphne, key auth, plan
check, metering) against a bare Django JSON view on the same server, in one run: rate and
the server's CPU per request (issue 20's figures).

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


def _server_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run() -> list[dict]:
    """Each path beside the bare Django view, measured in the same run on the same server:
    requests per second (median of ROUNDS) and the server's CPU per request."""
    from tests.integration.servers import daphne_processes

    database_url, drop = _database(os.environ.get("BENCH_DATABASE_URL"))
    redis_url = os.environ.get("BENCH_REDIS_URL", os.environ.get("REDIS_URL", ""))
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "tests.integration.settings"}
    month = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-09-01", "end": "2026-10-01"}
    targets = {
        "bare Django JsonResponse": ("/api/v1/test/bare", None),
        "bare Django JsonResponse + one database round trip (SELECT 1)": ("/api/v1/test/bare-database", None),
        "counted candlestick 31 days, JSON": ("/api/v1/market/candlestick", month),
        "counted candlestick 31 days, TOON": ("/api/v1/market/candlestick", {**month, "format": "toon"}),
        "counted candlestick hourly 30 days (720 rows), JSON": (
            "/api/v1/market/candlestick", {**month, "end": "2026-09-30", "resolution": "hourly"}),
        "GET /api/v1/me/usage": ("/api/v1/me/usage", None),
    }
    try:
        key = seed_demo_key(env, history_days=400)
        import httpx

        with daphne_processes(1, env=env) as (base,):
            for path, body in targets.values():
                response = (httpx.post(f"{base}{path}", json=body, headers={"Authorization": f"Bearer {key}"})
                            if body else httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {key}"}))
                assert response.status_code == 200, response.text
            # rounds interleave the paths: this machine's speed drifts by a third within
            # minutes, and each path must meet the reference under the same drift
            rates, cpu = {name: [] for name in targets}, {name: [] for name in targets}
            for _ in range(ROUNDS):
                for name, (path, body) in targets.items():
                    before = _server_cpu_s(base.pid)
                    done = _load((f"{base}{path}", body) if body else f"{base}{path}", key, SECONDS)
                    cpu[name].append((_server_cpu_s(base.pid) - before) / done * 1000)
                    rates[name].append(done / SECONDS)
            measured = {name: (statistics.median(rates[name]), statistics.median(cpu[name])) for name in targets}
    finally:
        drop()
    db = "PostgreSQL + Redis" if "postgres" in database_url and redis_url else "SQLite"
    bare_rate, bare_cpu = measured.pop("bare Django JsonResponse")
    rows = [{"figure": f"bare Django JsonResponse, {db}, 1 daphne, {CLIENTS} connections (the reference)",
             "value": f"{bare_rate:.0f} req/s, {bare_cpu:.2f} ms CPU/request", "comparison": "100 %",
             "goal": "reference", "met": None}]
    goals = {"counted candlestick 31 days, JSON": 0.5, "counted candlestick 31 days, TOON": 0.5,
             "GET /api/v1/me/usage": 0.6}
    for name, (rate, cpu) in measured.items():
        goal = goals.get(name)
        rows.append({"figure": f"{name}, {db}, 1 daphne, {CLIENTS} connections",
                     "value": f"{rate:.0f} req/s, {cpu:.2f} ms CPU/request",
                     "comparison": f"{rate / bare_rate:.0%} of bare Django ({bare_rate:.0f} req/s, same run)",
                     "goal": f">= {goal:.0%} of bare Django" + (", <= 5 ms CPU" if "candlestick" in name else "")
                     if goal else "report",
                     "met": (rate / bare_rate >= goal and ("candlestick" not in name or cpu <= 5)) if goal else None})
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
