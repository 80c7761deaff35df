"""Full mode on real processes: daphne + a Celery worker with beat + PostgreSQL + Redis.
A subscription reaches READY within a minute and bars keep arriving."""

import time

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from market.services import catalog_seed_demo

from .servers import daphne_processes, database_url_for
from .workers import celery_worker

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_subscribed_demo_pair_is_ready_within_a_minute_in_full_mode(make_account):
    catalog_seed_demo()
    key = api_key_create(account=make_account(), name="full").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL,
           "CELERY_BROKER_URL": settings.REDIS_URL, "CELERY_TASK_ALWAYS_EAGER": "false",
           "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "false", "INGESTION_LEASE_SECONDS": "10"}
    headers = {"Authorization": f"Bearer {key}"}
    with celery_worker(env=env), daphne_processes(1, env=env) as (base,):
        subscribed = httpx.post(f"{base}/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                                headers=headers, timeout=30)
        assert subscribed.status_code == 201, subscribed.text
        started, state = time.monotonic(), None
        while time.monotonic() - started < 60:
            state = httpx.get(f"{base}/api/v1/streams/binance/BTC/USDT/status", headers=headers, timeout=30).json()
            if state["state"] == "READY":
                break
            time.sleep(1)
        assert state["state"] == "READY", state
        first = httpx.get(f"{base}/api/v1/streams/binance/BTC/USDT/live", headers=headers, timeout=30).json()
        time.sleep(3)
        later = httpx.get(f"{base}/api/v1/streams/binance/BTC/USDT/live", headers=headers, timeout=30).json()
        assert first is not None and later["ts_ms"] > first["ts_ms"]
