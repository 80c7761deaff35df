"""GET /me/usage on a running server (full mode): its plain case is answered on the event
loop (config/loop.py) and that answer is the view's, byte for byte: a server with the loop
path turned off (DB_LOOP_POOL_MAX=0) answers the same status, body and headers. What the
loop leaves to the view is answered by it; counts are exact; a plan edit made by another
process shows within a second."""

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from billing.services import plan_upsert
from tests.integration.servers import daphne_processes, database_url_for, eventually, loop_connections

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

USAGE = "/api/v1/me/usage"
# the loop routes this module holds to their views (tests/api/test_loop_answers.py checks every route is held)
LOOP_ROUTES_PROVEN = (USAGE, "/v1/me/usage")
VARYING = {"date", "server"}


@pytest.fixture
def servers(make_account):
    """(a server answering on the loop, a server that never does, the account's key)."""
    account = make_account()
    key = api_key_create(account=account, name="loop").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(1, env=env) as (on,), daphne_processes(1, env={**env, "DB_LOOP_POOL_MAX": "0"}) as (off,):
        yield on, off, key


def _answer(base: str, key: str, query: str = "", path: str = USAGE, **headers) -> tuple[int, bytes, dict]:
    response = httpx.get(f"{base}{path}{query}", headers={"Authorization": f"Bearer {key}",
                                                          "X-Request-Id": "same-id", **headers})
    return response.status_code, response.content, {k: v for k, v in response.headers.items() if k not in VARYING}


def test_the_loop_answers_usage_exactly_as_the_view_does_in_json_and_toon(servers):
    on, off, key = servers
    auth = {"Authorization": f"Bearer {key}"}
    for base in (on, off):  # counted requests, so the counters are not zero; the key warms on both
        for rows in (1, 5, 9):
            assert httpx.get(f"{base}/api/v1/test/rows?rows={rows}", headers=auth).status_code == 200
    assert loop_connections() == 0
    for path in LOOP_ROUTES_PROVEN:
        for query, headers in [("", {}), ("?format=toon", {}), ("?format=json", {}),
                               ("", {"Accept": "application/toon"}), ("", {"Accept": "application/json, */*;q=0.5"})]:
            served_on_loop = _answer(on, key, query, path, **headers)
            served_by_view = _answer(off, key, query, path, **headers)
            assert served_on_loop == served_by_view, (path, query, headers)
            assert served_on_loop[0] == 200
    assert loop_connections() >= 1  # the answers above came from the loop's own statements
    usage = httpx.get(f"{on}{USAGE}", headers=auth).json()
    assert usage["requests"]["used"] == 6


@pytest.mark.parametrize(("query", "headers", "status"), [
    ("?x=1", {}, 400), ("?format=xml", {}, 400), ("", {"Accept": "text/html"}, 415),
])
def test_what_the_loop_leaves_to_the_view_gets_the_views_answer(servers, query, headers, status):
    on, off, key = servers
    for base in (on, off):
        assert httpx.get(f"{base}{USAGE}", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    served_on, served_off = _answer(on, key, query, **headers), _answer(off, key, query, **headers)
    assert served_on[0] == served_off[0] == status
    assert served_on == served_off


def test_refusals_and_other_methods_are_the_views(servers):
    on, off, key = servers
    httpx.get(f"{on}{USAGE}", headers={"Authorization": f"Bearer {key}"})
    forged = key[:-6] + ("aaaaaa" if not key.endswith("aaaaaa") else "bbbbbb")
    for base in (on, off):
        assert httpx.get(f"{base}{USAGE}").status_code == 401
        assert httpx.get(f"{base}{USAGE}", headers={"Authorization": f"Bearer {forged}"}).status_code == 401
        assert httpx.post(f"{base}{USAGE}", headers={"Authorization": f"Bearer {key}"}).status_code == 405
        assert httpx.get(f"{base}/v1/me/usage", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_odd_requests_get_the_same_answer_from_both_servers(servers):
    """A body over the upload limit, a client-chosen root path, a thousand query fields."""
    on, off, key = servers
    auth = {"Authorization": f"Bearer {key}", "X-Request-Id": "same-id"}
    answers = []
    for base in (on, off):
        assert httpx.get(f"{base}{USAGE}", headers=auth).status_code == 200
        oversized = httpx.request("GET", f"{base}{USAGE}", headers=auth, content=b"x" * 70_000)
        rooted = httpx.get(f"{base}{USAGE}", headers={**auth, "Daphne-Root-Path": "/api/v1/me"})
        crowded = httpx.get(f"{base}{USAGE}?" + "&".join(f"a{n}=1" for n in range(1100)), headers=auth)
        answers.append([(r.status_code, r.content) for r in (oversized, rooted, crowded)])
        assert httpx.get(f"{base}{USAGE}", headers=auth).status_code == 200
    assert answers[0] == answers[1]
    assert answers[0][0][0] == 413


def test_a_plan_edit_made_elsewhere_shows_on_the_loop_within_a_second(servers, plans):
    on, _, key = servers
    auth = {"Authorization": f"Bearer {key}"}
    for _ in range(2):
        assert httpx.get(f"{on}{USAGE}", headers=auth).status_code == 200
    plan_upsert(name="pro", monthly_requests=123_456)
    eventually(lambda: httpx.get(f"{on}{USAGE}", headers=auth).json()["requests"]["limit"], 123_456, within=1.0)
