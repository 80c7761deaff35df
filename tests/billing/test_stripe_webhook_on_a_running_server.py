"""Stripe's signed webhooks on a running server (daphne; PostgreSQL and Redis in full
mode, a SQLite file in embedded mode): an event signed here with the webhook secret, as
Stripe signs it, posted over HTTP, moves the account's plan and payment standing, and the
running server's next API request and stream connect follow within a second."""

import uuid

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.integration.servers import daphne_processes, database_url_for, eventually, manage, sqlite_site

from .stripe_events import WEBHOOK_PATH, WEBHOOK_SECRET, checkout_completed, invoice, signed

EVENTS = "/api/v1/streams/binance/BTC/USDT/events"


SEED = """
from accounts.services import account_upsert, api_key_create
from billing.services import plans_seed_defaults
from market.services import catalog_seed_demo
plans = {plan.name: plan for plan in plans_seed_defaults()}
catalog_seed_demo()
account = account_upsert(email=EMAIL, plan=plans["free"]).account
print(account.pk, api_key_create(account=account, name="stripe").plaintext)
"""


@pytest.fixture
def site(request, tmp_path):
    """(server base URL, account id, API key) of a free account on a running server that
    takes Stripe webhooks signed with WEBHOOK_SECRET: the test database in full mode, a
    SQLite file of its own in embedded mode (seeded by a process of its own)."""
    seed = SEED.replace("EMAIL", repr(f"stripe-{uuid.uuid4().hex[:8]}@example.com"))
    if connection.vendor == "postgresql":
        request.getfixturevalue("transactional_db")
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    else:
        env, _ = sqlite_site(tmp_path, ("migrate", "--noinput", "-v0"))
    account_id, key = manage(env, "shell", "-c", seed).split()[-2:]
    env = {**env, "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET, "INGESTION_AUTOSTART": "false"}
    with daphne_processes(1, env=env) as (base,):
        yield base, int(account_id), key


def post(base: str, stripe_event: dict, **sign) -> httpx.Response:
    body, headers = signed(stripe_event, **sign)
    return httpx.post(f"{base}{WEBHOOK_PATH}", content=body, headers=headers, timeout=30)


def connect_status(base: str, key: str) -> tuple[int, str]:
    """The SSE connect's status and, when refused, its error code (the stream is closed at once)."""
    with httpx.stream("GET", f"{base}{EVENTS}", headers={"Authorization": f"Bearer {key}"}, timeout=30) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, response.json()["error"]["details"].get("reason", "")
        return 200, ""


def test_signed_events_posted_to_a_running_server_move_the_plan_and_the_standing_and_forged_ones_do_not(site):
    base, account_id, key = site
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert api.get("/api/v1/me/usage").json()["plan"] == "free"

    forged = post(base, checkout_completed(account_id=account_id, plan="enterprise"), secret="whsec_guessed")
    assert forged.status_code == 400
    error = forged.json()["error"]
    assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == "Stripe-Signature"
    assert error["request_id"] == forged.headers["X-Request-Id"]

    bought = checkout_completed(account_id=account_id, plan="pro", customer="cus_live_1", subscription="sub_live_1")
    answer = post(base, bought)
    assert answer.status_code == 200 and answer.json()["outcome"].startswith("plan pro")
    eventually(lambda: api.get("/api/v1/me/usage").json()["plan"], "pro")
    assert api.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"}).status_code == 201
    assert connect_status(base, key) == (200, "")

    assert post(base, invoice("invoice.payment_failed", customer="cus_live_1",
                              subscription="sub_live_1")).json()["outcome"] == "payment lapsed"
    eventually(lambda: connect_status(base, key), (402, "payment_lapsed"))

    assert post(base, invoice("invoice.paid", customer="cus_live_1",
                              subscription="sub_live_1")).json()["outcome"] == "payment active"
    eventually(lambda: connect_status(base, key), (200, ""))

    replay = post(base, bought)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
