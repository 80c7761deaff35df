"""The live feed across real processes: Celery ingestion publishes, clients on two daphne
processes receive; refusals over HTTP; resume after a forced disconnect loses nothing."""

import json
import time

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from market.services import catalog_seed_demo

from .servers import daphne_processes, database_url_for, eventually
from .workers import celery_worker

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]
EVENTS = "/api/v1/streams/binance/BTC/USDT/events"


def read_events(response, want: int, kind: str = "bar", timeout: float = 30.0) -> list[tuple[str, str, str]]:
    """(event, id, data) tuples until `want` events of `kind` arrived."""
    out, block, deadline = [], {}, time.monotonic() + timeout
    for line in response.iter_lines():
        if time.monotonic() > deadline:
            break
        if not line:
            if block:
                out.append((block.get("event", "message"), block.get("id"), block.get("data")))
                block = {}
            if sum(1 for e in out if e[0] == kind) >= want:
                break
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(": ")
        block[field] = value
    return out


@pytest.fixture
def full_stack(make_account):
    catalog_seed_demo()
    account = make_account()
    key = api_key_create(account=account, name="sse").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL,
           "CELERY_BROKER_URL": settings.REDIS_URL, "CELERY_TASK_ALWAYS_EAGER": "false",
           "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "false"}
    with celery_worker(env=env), daphne_processes(2, env=env) as urls:
        yield account, key, urls


def test_bars_from_a_celery_worker_reach_clients_on_another_process_and_resume_without_loss(full_stack):
    account, key, (first, second) = full_stack
    api = {"Authorization": f"Bearer {key}"}
    headers = {**api, "Accept": "text/event-stream"}
    created = httpx.post(f"{first}/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                         headers=api, timeout=30)
    assert created.status_code == 201
    usage_before = httpx.get(f"{first}/api/v1/me/usage", headers=api).json()

    with httpx.stream("GET", f"{second}{EVENTS}", headers=headers, timeout=60) as response:
        assert response.status_code == 200
        events = read_events(response, want=3)
    bars = [e for e in events if e[0] == "bar"]
    assert len(bars) == 3, events
    last_id = bars[-1][1]
    time.sleep(4)  # disconnected: bars keep being ingested meanwhile
    with httpx.stream("GET", f"{first}{EVENTS}", headers={**headers, "Last-Event-ID": last_id},
                      timeout=60) as response:
        resumed = [e for e in read_events(response, want=6) if e[0] == "bar"]
    seen = [int(b[1].split(".")[0]) for b in bars + resumed]
    assert seen == list(range(seen[0], seen[0] + 1000 * len(seen), 1000)), seen  # contiguous, no gap, no repeat
    usage_after = httpx.get(f"{first}/api/v1/me/usage", headers=api).json()
    assert usage_after["requests"]["used"] == usage_before["requests"]["used"]
    assert usage_after["bytes"]["used"] == usage_before["bytes"]["used"]


def test_refusals_over_http(full_stack):
    from accounts.services import account_payment_set
    from billing.services import plan_upsert

    account, key, (base, _) = full_stack
    headers = {"Accept": "text/event-stream"}

    def status_of(path, **extra):
        with httpx.stream("GET", f"{base}{path}", headers={**headers, **extra}, timeout=30) as response:
            if response.status_code == 200:  # served (a change not yet seen): do not read the feed
                return 200, None
            assert response.headers["content-type"] == "application/json"
            return response.status_code, json.loads(response.read())["error"]["code"]

    assert status_of(EVENTS) == (401, "unauthorized")
    assert status_of(EVENTS, Authorization="Bearer mdp_live_x") == (401, "unauthorized")
    auth = {"Authorization": f"Bearer {key}"}
    assert status_of("/api/v1/streams/binance/NOPE/USDT/events", **auth) == (404, "not_found")
    assert status_of(EVENTS, **auth) == (402, "payment_required")  # not subscribed
    httpx.post(f"{base}/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
               headers=auth, timeout=30)
    # account changes reach the server within its account cache (ACCOUNT_CACHE_SECONDS)
    account_payment_set(account=account, payment="lapsed")
    eventually(lambda: status_of(EVENTS, **auth), (402, "payment_required"))
    account_payment_set(account=account, payment="active")
    account.plan = plan_upsert(name="data-only", features=["api"], monthly_requests=100, monthly_bytes=10**6)
    account.save()
    eventually(lambda: status_of(EVENTS, **auth), (403, "plan_forbidden"))


def test_a_down_pub_sub_backend_is_502_while_the_api_answers(make_account):
    """A server whose Redis is unreachable refuses new streams with 502 at once."""
    catalog_seed_demo()
    key = api_key_create(account=make_account(), name="sse").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": "redis://127.0.0.1:1/0",
           "INGESTION_AUTOSTART": "false"}
    with daphne_processes(1, env=env) as (base,):
        response = httpx.get(f"{base}{EVENTS}", headers={"Authorization": f"Bearer {key}",
                                                          "Accept": "text/event-stream"}, timeout=30)
        assert response.status_code == 502
        assert response.json()["error"]["code"] == "temporarily_unavailable"
        health = httpx.get(f"{base}/healthz", timeout=30)
        assert health.status_code == 503 and "cache" in health.json()["checks"]
