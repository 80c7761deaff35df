"""A running server with the seeded demo (seed_demo: the demo account, its key and its two
paid streams), on the database of the mode the tests run in: PostgreSQL and Redis (full
mode; the event loop's answers on) or an SQLite file (embedded mode)."""

from __future__ import annotations

import re
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from tests.integration.servers import daphne_processes, database_url_for, manage, sqlite_site

DEMO_KEY = re.compile(r"mdp_live_[0-9A-Za-z]{50}")


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def demo_environment(tmp_path) -> tuple[dict[str, str], str]:
    """The environment of a server on a migrated, seeded database, and the demo key."""
    seed = ("seed_demo", "--base-url", "http://127.0.0.1", "--history-days", "0")
    if on_postgres():  # pytest-django's test database, already migrated
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
        printed = manage(env, *seed)
    else:
        env, (_, printed) = sqlite_site(tmp_path, ("migrate", "--noinput", "-v0"), seed)
    return env, DEMO_KEY.search(printed).group(0)


@contextmanager
def demo_server(tmp_path, *, loop: bool = True):
    """(base URL, demo key, env) of a daphne process serving the demo; `loop=False` turns
    the event loop's answers off (DB_LOOP_POOL_MAX=0), so Django's views answer everything."""
    env, key = demo_environment(tmp_path)
    serve_env = {**env, "INGESTION_AUTOSTART": "false", "INGESTION_IN_PROCESS": "false"}
    if not loop:
        serve_env["DB_LOOP_POOL_MAX"] = "0"
    with daphne_processes(1, env=serve_env) as (base,):
        yield base, key, env


def demo_billing(env: dict[str, str]) -> str:
    """The demo account's subscriptions and its ledger of billed periods, as one text."""
    return manage(env, "shell", "-c", (
        "from accounts.models import User\n"
        "from billing.models import PairBillingPeriod\n"
        "from streaming.models import StreamSubscription\n"
        "account = User.objects.get(email='demo@example.com').account\n"
        "print(sorted((s.pair.path, s.metrics) for s in StreamSubscription.objects.filter(account=account)))\n"
        "print(sorted(map(str, PairBillingPeriod.objects.filter(account=account).values_list())))"))
