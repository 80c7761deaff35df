"""A large snapshot streamed by a running server, through the same request thread as every
other request (config/handler.py): two servers on one database, one streaming every
snapshot past a few rows, one answering whole. Both give the same document in JSON and TOON,
each body is metered to its byte, and many streamed snapshots at once, more than the
database pool holds, all complete (each request's thread returns its connection)."""

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from market.services import catalog_seed_demo
from tests.integration.servers import daphne_processes, database_url_for, embedded_site

PAIR = "/api/v1/streams/binance/BTC/USDT"


def test_embedded_a_streamed_snapshot_equals_the_whole_one_is_metered_exactly_and_leaks_no_connection(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    streamed_snapshots_on_running_servers(env, key)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_full_a_streamed_snapshot_equals_the_whole_one_is_metered_exactly_and_leaks_no_connection(make_account):
    catalog_seed_demo()
    key = api_key_create(account=make_account(), name="snapshots").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL,
           "DB_POOL_MAX": "8"}  # fewer connections than concurrent snapshots: a leaked one would starve them
    streamed_snapshots_on_running_servers(env, key)


def streamed_snapshots_on_running_servers(env, key):
    auth = {"Authorization": f"Bearer {key}"}
    serving = {**env, "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "true"}
    with daphne_processes(1, env=serving) as (ingesting,), \
            daphne_processes(1, env={**env, "INGESTION_AUTOSTART": "false", "SNAPSHOT_STREAM_ROWS": "3"}) as (streaming,), \
            httpx.Client(headers=auth, timeout=60, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        assert http.post(f"{ingesting}/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"}).status_code in (200, 201)
        deadline = time.monotonic() + 120
        while True:  # enough second bars that the second server streams the snapshot
            live = http.get(f"{ingesting}{PAIR}/live").json()
            if live and http.post(f"{ingesting}{PAIR}/snapshot", json={
                    "metrics": ["trade"], "granularity": "second", "to_ms": live["ts_ms"]}).json()["count"] >= 10:
                break
            assert time.monotonic() < deadline, "no second bars were ingested"
            time.sleep(1)
        window = {"metrics": ["trade", "book", "quote"], "granularity": "second", "to_ms": live["ts_ms"] + 1}

        for fmt in ("json", "toon"):
            whole = http.post(f"{ingesting}{PAIR}/snapshot", json={**window, "format": fmt})
            before = http.get(f"{streaming}/api/v1/me/usage").json()["bytes"]["used"]
            streamed = http.post(f"{streaming}{PAIR}/snapshot", json={**window, "format": fmt})
            assert streamed.status_code == whole.status_code == 200
            assert "content-length" not in streamed.headers  # it was streamed
            assert streamed.content == whole.content
            after = http.get(f"{streaming}/api/v1/me/usage").json()["bytes"]["used"]
            assert after - before == len(streamed.content)

        def snapshot(_):
            return http.post(f"{streaming}{PAIR}/snapshot", json=window).status_code

        with ThreadPoolExecutor(24) as pool:
            assert set(pool.map(snapshot, range(72))) == {200}
