"""Throughput of a counted endpoint with metering on, against the same endpoint with
metering off, through the full stack (daphne, auth, plan check), measured in one run.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python bench/bench_metering.py

Uses PostgreSQL and Redis when given (the production shape), else SQLite and the
in-process cache."""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_RATIO = 0.85
CLIENTS = int(os.environ.get("BENCH_CLIENTS", 8))
SECONDS = float(os.environ.get("BENCH_SECONDS", 5))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))


def _database(admin_url: str | None) -> tuple[str, callable]:
    """A fresh database for the run and a function that drops it."""
    if not admin_url:
        import tempfile

        return f"sqlite:///{tempfile.mkdtemp(prefix='bench-')}/bench.sqlite3", lambda: None
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    base, _, _ = admin_url.rpartition("/")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop():
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"{base}/{name}", drop


def _wrk(url: str, body: dict | None, key: str, seconds: float) -> int:
    """Requests completed by wrk (C, so the load generator does not compete for the GIL)."""
    import json
    import re
    import shutil
    import subprocess
    import tempfile

    script = ["wrk.headers['Authorization'] = 'Bearer %s'" % key]
    if body is not None:
        script += ["wrk.method = 'POST'", "wrk.headers['Content-Type'] = 'application/json'",
                   "wrk.body = [[%s]]" % json.dumps(body)]
    script.append("done = function(summary, latency, requests) "
                  "io.write(string.format('BENCH-NON2XX %d\\n', summary.errors.status)) end")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write("\n".join(script))
    out = subprocess.run([shutil.which("wrk"), "-t1", f"-c{CLIENTS}", f"-d{seconds:.0f}s", "-s", handle.name, url],
                         capture_output=True, text=True, check=True).stdout
    errors = int(re.search(r"BENCH-NON2XX (\d+)", out).group(1))
    assert errors == 0, out
    return int(re.search(r"(\d+) requests in", out).group(1))


def seed_demo_key(env: dict, *, history_days: int = 0) -> str:
    """Migrate the bench database, seed the demo, lift the Pro quotas out of the way and
    return the demo key."""
    import subprocess

    full_env = {**os.environ, **env}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=full_env, check=True)
    out = subprocess.run([sys.executable, "manage.py", "seed_demo", "--history-days", str(history_days)], cwd=ROOT,
                         env=full_env, check=True, capture_output=True, text=True).stdout
    subprocess.run([sys.executable, "manage.py", "plan", "pro", "--monthly-requests", str(10**12),
                    "--monthly-bytes", str(10**15)], cwd=ROOT, env=full_env, check=True, capture_output=True)
    return next(word for word in out.split() if word.startswith("mdp_live_"))


def _load(url, key: str, seconds: float) -> int:
    import shutil

    if isinstance(url, tuple):
        url, body = url
    else:
        body = None
    if shutil.which("wrk"):
        return _wrk(url, body, key, seconds)
    done, stop = [0] * CLIENTS, time.monotonic() + seconds

    def client(i):
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            while time.monotonic() < stop:
                response = http.post(url, json=body) if body is not None else http.get(url)
                assert response.status_code == 200, response.text[:200]
                done[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done)


def run() -> list[dict]:

    from tests.integration.servers import daphne_processes

    database_url, drop = _database(os.environ.get("BENCH_DATABASE_URL"))
    redis_url = os.environ.get("BENCH_REDIS_URL", os.environ.get("REDIS_URL", ""))
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url,
           "DJANGO_SETTINGS_MODULE": "tests.integration.settings"}
    paths = {"counted before the view (count, then bytes: subscribe, snapshots)": "/api/v1/test/rows?rows=31",
             "counted when served (one statement: series, live, status)": "/api/v1/test/rows-when-served?rows=31"}
    unmetered = "/api/v1/test/rows-unmetered?rows=31"
    try:
        key = seed_demo_key(env)
        with daphne_processes(1, env=env) as (base,):
            for path in [*paths.values(), unmetered]:
                _load(f"{base}{path}", key, 1)
            rates = {path: [] for path in [*paths.values(), unmetered]}
            for _ in range(ROUNDS):  # interleaved: this machine's speed drifts within minutes
                for path in rates:
                    rates[path].append(_load(f"{base}{path}", key, SECONDS) / SECONDS)
    finally:
        drop()
    rate_off = statistics.median(rates[unmetered])
    db = "PostgreSQL" if "postgres" in database_url else "SQLite"
    rows = []
    for name, path in paths.items():
        rate_on = statistics.median(rates[path])
        ratio = rate_on / rate_off
        rows.append({"figure": f"counted endpoint, 31 rows, metering on, {name} ({db}{' + Redis' if redis_url else ''}, "
                               f"1 daphne, {CLIENTS} clients)",
                     "value": f"{rate_on:.0f} req/s ({ratio:.0%} of off)",
                     "comparison": f"metering off {rate_off:.0f} req/s", "goal": f">= {GOAL_RATIO:.0%} of off",
                     "met": ratio >= GOAL_RATIO})
    return rows

if __name__ == "__main__":
    for row in run():
        print(row)
