"""Counted series requests and /me/usage through the full stack (daphne, key auth, plan
check, metering) against a bare Django JSON view on the same server, in one run: rate and
the server's CPU per request (issue 20's figures).

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_REDIS_URL=redis://127.0.0.1:6379/0 \
        python bench/bench_series.py

The hourly rows read a pair of `manage.py history_synthesize`: in a fresh database, 20 pairs
with 92 days of hours; with BENCH_HISTORY_DATABASE_URL, a database that already holds a
large synthesised history (e.g. 200 pairs, 3 days of seconds: 52 million second bars), used
as it is and not dropped.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_metering import CLIENTS, ROUNDS, SECONDS, _database, _load, seed_demo_key  # noqa: E402


def _server_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _history(env: dict, given: bool) -> str:
    """Synthesise the hourly history in a fresh database; say what the bar tables hold."""
    full_env = {**os.environ, **env}
    if not given:
        subprocess.run([sys.executable, "manage.py", "history_synthesize", "--pairs", "20", "--second-days", "0",
                        "--hour-days", "92", "-v0"], cwd=ROOT, env=full_env, check=True)
    if "postgres" not in env["DATABASE_URL"]:
        return "synthesised history"
    import psycopg

    with psycopg.connect(env["DATABASE_URL"]) as conn:
        seconds = stored_rows(conn, "market_secondbar") + 60 * stored_rows(conn, "market_secondbarpack")  # whole minutes
        hours = stored_rows(conn, "market_hourbar")
    return f"{seconds / 1e6:.1f} M second bars, {hours / 1e6:.1f} M hour bars stored"


def stored_rows(conn, table: str) -> int:
    """The rows a table holds as PostgreSQL last counted them (ANALYZE), over its
    partitions if it is partitioned (a table that is not is its own only leaf; the parent's
    own count, which ANALYZE also sets, would count the rows twice)."""
    return int(conn.execute("SELECT coalesce(sum(greatest(reltuples, 0)), 0) FROM pg_class "
                            "WHERE oid IN (SELECT relid FROM pg_partition_tree(%s::regclass) WHERE isleaf)",
                            (table,)).fetchone()[0])


def run() -> list[dict]:
    """Each path beside the bare Django view, measured in the same run on the same server:
    requests per second (median of ROUNDS) and the server's CPU per request."""
    from tests.integration.servers import daphne_processes

    history_url = os.environ.get("BENCH_HISTORY_DATABASE_URL")
    database_url, drop = (history_url, lambda: None) if history_url else _database(os.environ.get("BENCH_DATABASE_URL"))
    redis_url = os.environ.get("BENCH_REDIS_URL", os.environ.get("REDIS_URL", ""))
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "tests.integration.settings"}
    month = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-09-01", "end": "2026-10-01"}
    today = datetime.now(timezone.utc).date()
    hours = {"exchange": "synthetic", "symbol": "SYN001-USDT", "resolution": "hourly"}
    closed_hours = {**hours, "start": (today - timedelta(days=31)).isoformat(),
                    "end": (today - timedelta(days=2)).isoformat()}
    open_hours = {**hours, "start": (today - timedelta(days=29)).isoformat(), "end": today.isoformat()}
    targets = {
        "bare Django JsonResponse": ("/api/v1/test/bare", None),
        "bare Django JsonResponse + one database round trip (SELECT 1)": ("/api/v1/test/bare-database", None),
        "counted candlestick 31 days, JSON": ("/api/v1/market/candlestick", month),
        "counted candlestick 31 days, TOON": ("/api/v1/market/candlestick", {**month, "format": "toon"}),
        "counted candlestick hourly 30 days (720 rows), JSON": ("/api/v1/market/candlestick", closed_hours),
        "counted candlestick hourly 30 days (720 rows), TOON": (
            "/api/v1/market/candlestick", {**closed_hours, "format": "toon"}),
        "counted candlestick hourly 30 days to today (the current hour read every time), JSON": (
            "/api/v1/market/candlestick", open_hours),
        "GET /api/v1/me/usage": ("/api/v1/me/usage", None),
        "GET /api/v1/streams/binance/BTC/USDT/status": ("/api/v1/streams/binance/BTC/USDT/status", None),
        "GET /api/v1/streams/binance/BTC/USDT/live": ("/api/v1/streams/binance/BTC/USDT/live", None),
    }
    try:
        key = seed_demo_key(env, history_days=400)
        held = _history(env, bool(history_url))
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
             "counted candlestick hourly 30 days (720 rows), JSON": 0.5, "GET /api/v1/me/usage": 0.6}
    for name, (rate, cpu) in measured.items():
        goal = goals.get(name)
        on = f" ({held})" if "hourly" in name else ""
        rows.append({"figure": f"{name}, {db}{on}, 1 daphne, {CLIENTS} connections",
                     "value": f"{rate:.0f} req/s, {cpu:.2f} ms CPU/request",
                     "comparison": f"{rate / bare_rate:.0%} of bare Django ({bare_rate:.0f} req/s, same run)",
                     "goal": f">= {goal:.0%} of bare Django" + (", <= 5 ms CPU" if "candlestick" in name else "")
                     if goal else "report",
                     "met": (rate / bare_rate >= goal and ("candlestick" not in name or cpu <= 5)) if goal else None})
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
