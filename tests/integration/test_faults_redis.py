"""Redis goes away under a running full-mode service (daphne + Celery ingestion + PostgreSQL):
new SSE streams and the live endpoint answer 502 `temporarily_unavailable` in the envelope,
the series and control-plane endpoints keep answering 200 from PostgreSQL (API keys are
checked against the database meanwhile: revoked or forged keys stay refused), and when
Redis comes back everything recovers by itself, without restarting a process.

The Redis that is stopped is a private redis-server of this test (the machine's shared one
serves other test runs)."""

import os
import time

import httpx
import pytest
from django.db import connection

from accounts import keys
from accounts.services import api_key_create, api_key_revoke
from market.models import Pair
from market.services import catalog_seed_demo
from config.clock import now_ms

from .faults import error_code, kill9, private_redis, seed_hour_history, sse_events, wait_for
from .servers import daphne_processes, database_url_for
from .workers import celery_worker

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

PAIR = "/api/v1/streams/binance/BTC/USDT"
CANDLES = {"exchange": "binance", "symbol": "BTC-USDT", "start": None, "end": None}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def test_redis_outage_refuses_live_with_502_keeps_series_serving_and_recovers_without_restart(make_account):
    catalog_seed_demo()
    pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    seed_hour_history(pair, days=5, now_ms=now_ms())
    account = make_account()
    key = api_key_create(account=account, name="faults").plaintext
    revoked = api_key_create(account=account, name="revoked")
    api_key_revoke(api_key=revoked.api_key, via="command")
    lookup = key[len(keys.PREFIX):len(keys.PREFIX) + keys.LOOKUP_LEN]  # right lookup id, wrong secret
    forged = keys.PREFIX + lookup + "0" * keys.SECRET_LEN + keys.checksum(lookup + "0" * keys.SECRET_LEN)
    api = {"Authorization": f"Bearer {key}"}
    sse = {**api, "Accept": "text/event-stream"}
    today = time.strftime("%Y-%m-%d", time.gmtime())
    first_day = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 4 * 86400))
    candles = {**CANDLES, "start": first_day, "end": today}

    with private_redis() as redis_server:
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": redis_server.url,
               "CELERY_BROKER_URL": redis_server.url, "CELERY_TASK_ALWAYS_EAGER": "false",
               "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "false", "INGESTION_LEASE_SECONDS": "10",
               "INGESTION_BACKFILL_HOURS": "1"}
        with celery_worker(env=env) as worker, daphne_processes(1, env=env) as (base,), \
                httpx.Client(base_url=base, headers=api, timeout=30) as http:
            def candlesticks_ok() -> None:
                response = http.post("/api/v1/market/candlestick", json=candles)
                assert response.status_code == 200, response.text
                assert response.json()["meta"]["count"] >= 4

            def live_bar():
                response = http.get(f"{PAIR}/live")
                return response.json() if response.status_code == 200 else None

            # Before: everything works, live bars flow.
            assert http.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"}
                             ).status_code == 201
            wait_for(live_bar, timeout=60, interval=0.5, message="a first live bar")
            candlesticks_ok()
            with httpx.stream("GET", f"{base}{PAIR}/events", headers=sse, timeout=20) as response:
                assert response.status_code == 200
                assert [e for e in sse_events(response, kind="bar", want=1, timeout=15) if e[0] == "bar"]

            # Redis goes away.
            redis_server.stop()
            outage_started_ms = now_ms()

            def refused_502(response) -> bool:
                return response.status_code == 502 and error_code(response) == "temporarily_unavailable" \
                    and response.headers["content-type"].startswith("application/json")

            started = time.monotonic()
            response = httpx.get(f"{base}{PAIR}/events", headers=sse, timeout=20)
            assert refused_502(response), (response.status_code, response.text)
            assert time.monotonic() - started < 10  # refused promptly, not after a hang
            response = http.get(f"{PAIR}/live")
            assert refused_502(response), (response.status_code, response.text)
            for other in (revoked.plaintext, forged):  # without the key cache the database decides
                response = http.post("/api/v1/market/candlestick", json=candles,
                                     headers={"Authorization": f"Bearer {other}"})
                assert response.status_code == 401 and error_code(response) == "unauthorized", response.text
            for _ in range(3):
                candlesticks_ok()
                status = http.get(f"{PAIR}/status")
                assert status.status_code == 200, status.text
                assert http.get("/api/v1/me/usage").status_code == 200
            health = httpx.get(f"{base}/healthz", timeout=20)
            assert health.status_code == 503
            assert health.json()["checks"]["cache"].startswith("failing")
            assert health.json()["checks"]["pubsub"].startswith("failing")
            assert worker.poll() is None, "the Celery worker died with Redis"

            # Redis comes back (empty: no persistence). No process is restarted.
            redis_server.start()
            fresh = wait_for(lambda: (bar := live_bar()) and bar["ts_ms"] > outage_started_ms and bar,
                             timeout=60, interval=0.5, message="live bars after Redis came back")
            assert fresh["ts_ms"] > outage_started_ms

            def stream_delivers_bars():
                with httpx.stream("GET", f"{base}{PAIR}/events", headers=sse, timeout=20) as response:
                    if response.status_code != 200:
                        return False
                    return [e for e in sse_events(response, kind="bar", want=2, timeout=15) if e[0] == "bar"]

            bars = wait_for(stream_delivers_bars, timeout=60, interval=0.5, message="an SSE stream after recovery")
            assert all(int(b[1].split(".")[0]) > outage_started_ms for b in bars)
            candlesticks_ok()
            wait_for(lambda: httpx.get(f"{base}/healthz", timeout=20).status_code == 200, timeout=30, interval=0.5,
                     message="a healthy /healthz")
            assert _alive(base.pid) and worker.poll() is None
            kill9(worker)  # done; a warm shutdown would wait for the long-running ingestion task
