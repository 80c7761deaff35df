"""PostgreSQL restarted, then stopped for a while, under load on two daphne processes:
every request either succeeds or fails cleanly with 502 `temporarily_unavailable` in the
envelope (never a 500, never a hang past a bounded time), and once the database is back the
service answers 200 again by itself, without restarting a process.

The database that is restarted is a private cluster of this test (initdb in a temporary
directory on a free port); the machine's shared PostgreSQL serves other test runs."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import httpx
import pytest
from django.conf import settings

from .faults import error_code, private_postgres, wait_for
from .servers import ROOT, daphne_processes

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

POOL_TIMEOUT_SECONDS = 3  # how long a request waits for a database connection
BOUND_SECONDS = 2 * POOL_TIMEOUT_SECONDS  # no request may take longer, outage or not
# the database-backed requests each client cycles through; `closed candlestick` and `usage`
# are answered on the event loop while the database is up (config/loop.py)
KINDS = ["candlestick", "status", "usage", "sse", "closed candlestick"]
CLIENT_THREADS = 8  # 4 concurrent clients per server: requests queued behind each other would show
PAIR = "/api/v1/streams/binance/BTC/USDT"

PREPARE = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from accounts.services import account_upsert, api_key_create
from billing.services import plan_upsert
from market.models import Pair
from market.services import catalog_seed_demo
from config.clock import now_ms
from streaming.services import subscription_upsert
from tests.integration.faults import seed_hour_history
plan = plan_upsert(name="faults", features=["api", "streaming"], monthly_requests=10**9, monthly_bytes=10**12)
account = account_upsert(email="faults@example.com", plan=plan).account
catalog_seed_demo()
pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
seed_hour_history(pair, days=5, now_ms=now_ms())
subscription_upsert(account=account, pair=pair, metrics=["trade", "book", "quote"])
print(api_key_create(account=account, name="faults").plaintext)
"""


@dataclass
class Outcome:
    kind: str
    server: str
    started: float
    ended: float
    status: int | None = None
    code: str | None = None
    content_type: str = ""
    failure: str = ""  # a client-side failure: timeout, connection reset

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def clean(self) -> bool:
        """200, or 502 temporarily_unavailable as a JSON envelope."""
        if self.failure:
            return False
        if self.status == 200:
            return True
        return (self.status == 502 and self.code == "temporarily_unavailable"
                and self.content_type.startswith("application/json"))


class Load:
    """Client threads cycling through database-backed requests on every server."""

    def __init__(self, urls: list[str], key: str):
        self.urls, self.key = urls, key
        self.outcomes: list[Outcome] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(CLIENT_THREADS)]
        today = time.strftime("%Y-%m-%d", time.gmtime())
        first = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 4 * 86400))
        yesterday = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86400))
        self.candles = {"exchange": "binance", "symbol": "BTC-USDT", "start": first, "end": today}
        self.closed_candles = {**self.candles, "end": yesterday}

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join(BOUND_SECONDS + 30)

    def _request(self, http: httpx.Client, kind: str):
        if kind in ("candlestick", "closed candlestick"):
            return http.post("/api/v1/market/candlestick",
                             json=self.candles if kind == "candlestick" else self.closed_candles)
        if kind == "status":
            return http.get(f"{PAIR}/status")
        if kind == "usage":
            return http.get("/api/v1/me/usage")
        with http.stream("GET", f"{PAIR}/events", headers={"Accept": "text/event-stream"}) as response:
            if response.status_code != 200:
                response.read()
            return response

    def _run(self, number: int) -> None:
        base = self.urls[number % len(self.urls)]
        kinds = itertools.cycle(KINDS[number % len(KINDS):] + KINDS[:number % len(KINDS)])
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {self.key}"},
                          timeout=BOUND_SECONDS + 20) as http:
            while not self._stop.is_set():
                kind = next(kinds)
                outcome = Outcome(kind, base, time.monotonic(), 0.0)
                try:
                    response = self._request(http, kind)
                    outcome.status = response.status_code
                    outcome.content_type = response.headers.get("content-type", "")
                    if response.status_code != 200:
                        outcome.code = error_code(response)
                except httpx.HTTPError as exc:
                    outcome.failure = f"{type(exc).__name__}: {exc}"
                outcome.ended = time.monotonic()
                with self._lock:
                    self.outcomes.append(outcome)
                time.sleep(0.02)

    def since(self, moment: float) -> list[Outcome]:
        with self._lock:
            return [o for o in self.outcomes if o.started >= moment]

    def between(self, start: float, end: float) -> list[Outcome]:
        with self._lock:
            return [o for o in self.outcomes if o.started >= start and o.ended <= end]


def _describe(outcomes: list[Outcome]) -> str:
    return "\n".join(f"{o.kind} {o.server} {o.status} {o.code} {o.content_type!r} {o.seconds:.2f}s {o.failure}"
                     for o in outcomes[:20])


def test_postgres_restart_and_outage_under_load_fail_cleanly_with_502_and_recover_without_restart():
    with private_postgres() as pg:
        database_url = pg.create_database("faults")
        env = {"DATABASE_URL": database_url, "REDIS_URL": settings.REDIS_URL, "INGESTION_AUTOSTART": "false",
               "DB_POOL_TIMEOUT_SECONDS": str(POOL_TIMEOUT_SECONDS)}
        prepared = subprocess.run(
            [sys.executable, "-c", PREPARE], cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.integration.settings", "LOG_LEVEL": "WARNING", **env})
        assert prepared.returncode == 0, prepared.stderr[-3000:]
        key = prepared.stdout.strip().splitlines()[-1]

        with daphne_processes(2, env=env) as urls, Load(urls, key) as load:
            started = time.monotonic()
            wait_for(lambda: len(load.since(started)) >= 40, timeout=30, message="load before the restart")
            before = load.since(started)
            assert all(o.status == 200 for o in before), _describe([o for o in before if o.status != 200])

            # 1. A restart (fast shutdown: sessions are terminated mid-request) under load.
            pg.restart()
            restarted = time.monotonic()
            wait_for(lambda: sum(o.status == 200 for o in load.since(restarted)) >= 20, timeout=30,
                     message="requests succeeding after the restart")

            # 2. An outage: the database is down for several pool timeouts.
            pg.stop()
            stopped = time.monotonic()
            health = httpx.get(f"{urls[0]}/healthz", timeout=BOUND_SECONDS + 20)
            assert health.status_code == 503 and health.json()["checks"]["database"].startswith("failing"), \
                health.text
            def every_kind_answered_502() -> bool:
                # each kind of request, not only the quickest, is seen failing cleanly
                failed = [o for o in load.since(stopped) if o.status == 502]
                return len(failed) >= 2 * CLIENT_THREADS and {o.kind for o in failed} == set(KINDS)

            wait_for(every_kind_answered_502, timeout=BOUND_SECONDS * 4, message="requests answered during the outage")
            during = load.between(stopped, time.monotonic())

            # 3. The database comes back; nothing is restarted.
            pg.start()
            back = time.monotonic()

            def every_server_answers_200_again() -> bool:
                recent = load.since(back)
                return all(any(o.server == url and o.status == 200 for o in recent) for url in urls)

            wait_for(every_server_answers_200_again, timeout=30, interval=0.2, message="recovery")
            recovered = time.monotonic()
            wait_for(lambda: len(load.since(recovered)) >= 60, timeout=30, message="load after recovery")
            health = httpx.get(f"{urls[1]}/healthz", timeout=BOUND_SECONDS + 20)
            assert health.status_code == 200, health.text

        outcomes = load.outcomes
        dirty = [o for o in outcomes if not o.clean]
        assert not dirty, f"{len(dirty)} responses were neither 200 nor the 502 envelope:\n{_describe(dirty)}"
        slow = [o for o in outcomes if o.seconds > BOUND_SECONDS]
        assert not slow, f"{len(slow)} requests took over {BOUND_SECONDS} s:\n{_describe(slow)}"
        assert during and all(o.status == 502 for o in during), _describe([o for o in during if o.status != 502])
        assert {o.kind for o in during} == set(KINDS)
        after = load.since(recovered)
        assert all(o.status == 200 for o in after), _describe([o for o in after if o.status != 200])
