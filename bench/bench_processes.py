"""Serving with several daphne processes on one port (`python -m config.serve --processes N`)
against one, in one run on the same database: the counted 31-day candlestick and the bare
Django view, wrk with 32 connections from this machine (issue 20's "two processes serve at
least 1.7x one").

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_REDIS_URL=redis://127.0.0.1:6379/0 \\
        python bench/bench_processes.py

On a machine whose cores also run the load generator, PostgreSQL and Redis (as here), the
ratio says what those leave to the second process, not what a second core gives a server
of its own: each row says how many of the machine's cores were busy in both runs."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_metering import ROUNDS, SECONDS, _database, _load, seed_demo_key  # noqa: E402

GOAL = 1.7
MONTH = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-09-01", "end": "2026-10-01"}


def _serving(env: dict, processes: int):
    from tests.integration.servers import free_port, wait_until_serving

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="bench-serve-", suffix=".log", delete=False)
    server = subprocess.Popen([sys.executable, "-m", "config.serve", "--port", str(port), "--processes", str(processes)],
                              cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "LOG_LEVEL": "WARNING", **env})
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(url, server, log.name)
    return server, url


def _machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all the machine's cores so far (Linux /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def _busy_cores(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How many of the machine's cores were busy between two `_machine_cpu` readings."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return busy / total * os.cpu_count() if total else 0.0


def run() -> list[dict]:
    database_url, drop = _database(os.environ.get("BENCH_DATABASE_URL"))
    redis_url = os.environ.get("BENCH_REDIS_URL", os.environ.get("REDIS_URL", ""))
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "tests.integration.settings",
           "INGESTION_AUTOSTART": "false"}
    rates: dict[tuple[str, int], float] = {}
    busy: dict[tuple[str, int], float] = {}
    try:
        key = seed_demo_key(env, history_days=400)
        for processes in (1, 2):
            server, url = _serving(env, processes)
            try:
                for name, target in (("bare Django JsonResponse", f"{url}/api/v1/test/bare"),
                                     ("counted candlestick 31 days, JSON", (f"{url}/api/v1/market/candlestick", MONTH))):
                    _load(target, key, 2)  # warm every process
                    runs = []
                    for _ in range(ROUNDS):
                        before = _machine_cpu()
                        done = _load(target, key, SECONDS)
                        runs.append((done / SECONDS, _busy_cores(before, _machine_cpu())))
                    rates[name, processes] = statistics.median(rate for rate, _ in runs)
                    busy[name, processes] = statistics.median(cores for _, cores in runs)
            finally:
                server.terminate()
                server.wait(timeout=60)
    finally:
        drop()
    rows = []
    for name in ("bare Django JsonResponse", "counted candlestick 31 days, JSON"):
        one, two = rates[name, 1], rates[name, 2]
        counted = "candlestick" in name
        rows.append({"figure": f"{name}, 2 daphne processes on one port (config.serve) against 1, PostgreSQL + Redis",
                     "value": f"{two:.0f} req/s against {one:.0f} req/s ({two / one:.2f}x)",
                     "comparison": f"the same server with 1 process, same run; the machine's {os.cpu_count()} cores "
                                   f"busy (servers, PostgreSQL, Redis, wrk): {busy[name, 2]:.2f} against "
                                   f"{busy[name, 1]:.2f} (so at most {os.cpu_count() / busy[name, 1]:.2f}x here)",
                     "goal": f">= {GOAL}x" if counted else "report",
                     "met": (two / one >= GOAL) if counted else None})
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
