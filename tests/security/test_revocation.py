"""A revoked key is refused at once: on the very next request, on every route, whichever
way it was revoked, on every server process.

Already proven elsewhere and not repeated here: one route in-process
(tests/accounts/test_api_keys.py::test_a_key_authenticates_and_revoking_it_gives_401_on_the_next_request),
an open SSE stream closing on revoke and a stream token dying with its key
(tests/streaming/test_sse.py). Added here: every API route and the SSE connect, warm in
the cache when revoked, revoked by the service, the web page and the staff command, and
(full mode) two daphne processes refusing a key revoked by a third process."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from accounts.keys import parse
from accounts.services import api_key_revoke
from config.api.errors import Unauthorized
from streaming.sse_auth import _authorize
from tests.integration.servers import ROOT, daphne_processes, database_url_for, embedded_site, eventually, manage

from .conftest import api_paths

BODIES = {
    "/api/v1/streams": {"exchange": "binance", "base": "BTC", "quote": "USDT"},
    "/api/v1/streams/binance/BTC/USDT/snapshot": {"metrics": ["trade"], "granularity": "hour"},
    "/api/v1/market/": {"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-02"},
}


def keyed_operations() -> list[tuple[str, str]]:
    """(method, path) of every API operation that takes a key, from the URLconf."""
    from django.urls import resolve

    operations = []
    for path in api_paths():
        view = resolve(path).func
        cls = getattr(view, "view_class", None) or getattr(view, "cls", None)
        if cls is None or not getattr(cls, "authentication_classes", None) or "schema" in path or "docs" in path:
            continue
        methods = [m for m in ("get", "post", "delete") if hasattr(cls, m)]
        operations += [(method, path) for method in methods]
    return operations


def call(client, method: str, path: str):
    body = next((b for prefix, b in BODIES.items() if path.startswith(prefix)), None)
    if method == "post":
        return client.post(path, body or {}, format="json")
    return getattr(client, method)(path)


def revoke_by_service(customer, key):
    api_key_revoke(api_key=key.api_key, via="command")


def revoke_on_the_web_page(customer, key):
    assert customer.web().post(f"/account/keys/{key.api_key.pk}/revoke/").status_code == 302


def revoke_by_staff_command(customer, key):
    call_command("apikey", customer.email, "--revoke", key.api_key.display)


@pytest.mark.parametrize("revoke", [revoke_by_service, revoke_on_the_web_page, revoke_by_staff_command])
def test_a_warm_key_is_refused_on_every_route_on_the_next_request_after_revocation(
        two_customers, client_for, revoke):
    a, _ = two_customers
    operations = keyed_operations()
    assert len(operations) >= 14, operations
    doomed, other = a.keys[1], a.keys[0]
    client = client_for(doomed.plaintext)
    _authorize(f"Bearer {doomed.plaintext}", None, "binance", "BTC", "USDT", None)  # the SSE connect
    for method, path in operations:  # every route answers the key, and its cache entry is warm
        assert call(client, method, path).status_code != 401, (method, path)

    revoke(a, doomed)

    for method, path in operations:
        response = call(client, method, path)
        assert response.status_code == 401, (method, path, response.status_code)
        assert response.json()["error"]["code"] == "unauthorized"
    with pytest.raises(Unauthorized):
        _authorize(f"Bearer {doomed.plaintext}", None, "binance", "BTC", "USDT", None)
    # the account's other key is untouched
    assert client_for(other.plaintext).get("/api/v1/me/usage").status_code == 200


def test_a_revoked_key_stays_refused_when_its_cache_entry_is_gone(two_customers, client_for):
    """After the tombstone expires (or Redis is flushed) the database still says revoked."""
    from django.core.cache import cache

    from accounts import key_cache
    from accounts.verification import key_cache_name

    a, _ = two_customers
    client = client_for(a.key)
    assert client.get("/api/v1/me/usage").status_code == 200
    api_key_revoke(api_key=a.keys[0].api_key, via="command")
    key_cache.store().delete(key_cache_name(a.keys[0].api_key.lookup_id))
    cache.clear()
    assert client.get("/api/v1/me/usage").status_code == 401


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_key_revoked_by_another_process_is_refused_within_a_second_by_every_server_process(two_customers):
    """Full mode: each server process reuses the key it verified only until its recheck is
    due (API_KEY_RECHECK_SECONDS), then meets the revoke's tombstone in Redis."""
    a, _ = two_customers
    doomed, other = a.keys[1], a.keys[0]
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(2, env=env) as urls:
        clients = [httpx.Client(base_url=url, timeout=30) for url in urls]
        try:
            for http in clients:  # warm on both processes
                for _ in range(2):
                    assert http.get("/api/v1/me/usage", headers={"Authorization": f"Bearer {doomed.plaintext}"}
                                    ).status_code == 200
            result = subprocess.run(
                [sys.executable, "manage.py", "apikey", a.email, "--revoke", doomed.api_key.display],
                cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.integration.settings", **env},
                capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, result.stderr
            for http in clients:
                assert _refused_within(http, doomed.plaintext, 1.0) <= 1.0
                stream = http.get("/api/v1/streams/binance/BTC/USDT/events",
                                  headers={"Authorization": f"Bearer {doomed.plaintext}"})
                assert stream.status_code == 401
                assert http.get("/api/v1/me/usage", headers={"Authorization": f"Bearer {other.plaintext}"}
                                ).status_code == 200
        finally:
            for http in clients:
                http.close()


def _refused_within(http, key: str, seconds: float) -> float:
    """Seconds until the server answers 401 to the key (polling), failing after `seconds`."""
    import time

    started = time.monotonic()
    while True:
        response = http.get("/api/v1/me/usage", headers={"Authorization": f"Bearer {key}"})
        elapsed = time.monotonic() - started
        if response.status_code == 401:
            assert response.json()["error"]["code"] == "unauthorized"
            return elapsed
        assert response.status_code == 200, response.text
        assert elapsed < seconds, f"still served {elapsed:.2f} s after the revoke"


def _closed_within(url: str, key: str, change, seconds: float) -> tuple[float, dict]:
    """Open a stream, make `change` from outside once it is open, and read until the server
    closes it: (seconds from the change to `stream-closed`, its data)."""
    import json
    import time

    with httpx.Client(base_url=url, timeout=httpx.Timeout(30, read=seconds + 2)) as http, http.stream(
            "GET", "/api/v1/streams/binance/BTC/USDT/events", headers={"Authorization": f"Bearer {key}"}) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        for line in lines:  # the opening status event: the stream is open
            if line.startswith("event: status"):
                break
        change()
        changed = time.monotonic()
        event = None
        for line in lines:
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: ") and event == "stream-closed":
                elapsed = time.monotonic() - changed
                assert elapsed <= seconds, f"closed {elapsed:.2f} s after the change"
                return elapsed, json.loads(line[len("data: "):])
    raise AssertionError("the stream ended without stream-closed")


def _stream_status(http, key: str) -> int:
    with http.stream("GET", "/api/v1/streams/binance/BTC/USDT/events",
                     headers={"Authorization": f"Bearer {key}"}) as response:
        return response.status_code


def test_a_key_revoked_from_the_command_line_is_refused_within_a_second_by_every_embedded_server(tmp_path):
    """Embedded mode as `make run` serves it (SQLite file, no Redis: each process keeps its
    own key cache): two server processes warm with a key, the staff command revokes it from a
    third, and both refuse it within a second (API_KEY_RECHECK_SECONDS bounds it), the SSE
    connect included, and an open stream of the key closes within the second with the reason;
    a plan edit and a payment lapse made from the command line refuse stream connects within
    a second too (ACCOUNT_CACHE_SECONDS), and the lapse closes the open stream. Everything over HTTP and the command line."""
    env, (doomed, kept) = embedded_site(tmp_path, keys=2)
    with daphne_processes(2, env=env) as urls:
        clients = [httpx.Client(base_url=url, timeout=30) for url in urls]
        try:
            for http in clients:  # warm in both processes' own caches
                for _ in range(3):
                    assert http.get("/api/v1/me/usage", headers={"Authorization": f"Bearer {doomed}"}
                                    ).status_code == 200
            assert clients[0].post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                                   headers={"Authorization": f"Bearer {kept}"}).status_code in (200, 201)
            # an open stream of the key closes within the second too, with the reason
            _, closed = _closed_within(urls[1], doomed, lambda: manage(
                env, "apikey", "a@example.com", "--revoke", parse(doomed).display), seconds=1.0)
            assert closed == {"reason": "the API key was revoked"}
            for http in clients:
                assert _refused_within(http, doomed, 1.0) <= 1.0
                assert _stream_status(http, doomed) == 401
                assert http.get("/api/v1/me/usage", headers={"Authorization": f"Bearer {kept}"}).status_code == 200
            # a plan edited and a payment lapsed by staff from another shell: the next connect
            for http in clients:  # subscribed, so the stream opens while the plan allows it
                assert http.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                                 headers={"Authorization": f"Bearer {kept}"}).status_code in (200, 201)
                assert _stream_status(http, kept) == 200
            manage(env, "plan", "pro", "--features", "api")
            for http in clients:
                eventually(lambda: _stream_status(http, kept), 403)
            manage(env, "plan", "pro", "--features", "api,streaming")
            _, closed = _closed_within(urls[0], kept, lambda: manage(
                env, "account", "a@example.com", "--plan", "pro", "--payment", "lapsed"), seconds=1.0)
            assert closed == {"reason": "the account's payment lapsed"}
            for http in clients:
                eventually(lambda: _stream_status(http, kept), 402)
        finally:
            for http in clients:
                http.close()
