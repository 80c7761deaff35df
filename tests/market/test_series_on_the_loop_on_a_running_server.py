"""The series endpoints on a running server (full mode): a plain request for a closed range
the server read lately is answered on the event loop (config/loop.py), and that answer is
the view's byte for byte: a server with the loop path off (DB_LOOP_POOL_MAX=0) answers the
same status, body and headers. Counting stays exact under concurrency on two processes and
stops exactly at the quota; what the loop leaves to the view gets the view's answer; a
correction of a closed day reaches the loop's answers within a second."""

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from billing.models import UsageCounter
from billing.services import plan_upsert
from config.clock import now_ms
from market.models import DayBar, Pair
from market.services import catalog_seed_demo
from tests.integration.faults import seed_hour_history
from tests.integration.servers import daphne_processes, database_url_for, eventually, loop_connections

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

VARYING = {"date", "server"}
TODAY = datetime.now(timezone.utc).date()
CLOSED = {"exchange": "binance", "symbol": "BTC-USDT", "start": (TODAY - timedelta(days=3)).isoformat(),
          "end": (TODAY - timedelta(days=1)).isoformat()}


@pytest.fixture
def site(make_account):
    """Five days of history, two accounts on the same plan and their keys, and the
    environment a server of this database runs with."""
    catalog_seed_demo()
    pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    seed_hour_history(pair, days=5, now_ms=now_ms())
    keys = [api_key_create(account=make_account(), name="loop").plaintext for _ in range(2)]
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    return pair, keys, env


def _post(base: str, key: str, path: str, body, **headers) -> tuple[int, bytes, dict]:
    response = httpx.post(f"{base}/api/v1/market/{path}", json=body, timeout=30,
                          headers={"Authorization": f"Bearer {key}", "X-Request-Id": "same-id", **headers})
    return response.status_code, response.content, {k: v for k, v in response.headers.items() if k not in VARYING}


ASKED = [
    ("candlestick", CLOSED, {}),
    ("candlestick", {**CLOSED, "format": "toon"}, {}),
    ("candlestick", CLOSED, {"Accept": "application/toon"}),
    ("candlestick", {**CLOSED, "resolution": "hourly"}, {}),
    ("trades", CLOSED, {}),
    ("spread", {**CLOSED, "format": "json"}, {}),
    ("limit-orders", {**CLOSED, "side": "bid_amount"}, {}),
    ("candlestick", {**CLOSED, "format": "toon"}, {"Content-Type": "Application/JSON"}),  # media types ignore case
]


# the loop routes this module holds to their views (tests/api/test_loop_answers.py checks every route is held)
LOOP_ROUTES_PROVEN = {f"/api/v1/market/{path}" for path, _, _ in ASKED}


def test_the_loop_answers_each_series_exactly_as_its_view_does(site):
    _, (key_on, key_off), env = site
    with daphne_processes(1, env=env) as (on,), daphne_processes(1, env={**env, "DB_LOOP_POOL_MAX": "0"}) as (off,):
        for path, body, headers in ASKED:  # the first of each is the view's: it reads what the loop reuses
            for _ in range(3):
                answers = _post(on, key_on, path, body, **headers), _post(off, key_off, path, body, **headers)
                assert answers[0] == answers[1], (path, body, headers)
                assert answers[0][0] == 200
        assert loop_connections() >= 1  # answers came from the loop's own statements
    for key in (key_on, key_off):
        month = UsageCounter.objects.get(account__api_keys__lookup_id=key[9:21], period="month")
        assert month.requests == 3 * len(ASKED)


@pytest.mark.parametrize(("body", "headers", "status"), [
    ({**CLOSED, "typo": 1}, {}, 400),
    ({**CLOSED, "start": "2026-13-01"}, {}, 400),
    ({**CLOSED, "symbol": "NOPE-USDT"}, {}, 400),
    ({**CLOSED, "format": "xml"}, {}, 400),
    ({**CLOSED, "end": TODAY.isoformat()}, {}, 200),  # reaches into today: read by the view every time
    (CLOSED, {"Accept": "text/html"}, 415),
])
def test_what_the_loop_leaves_to_the_view_gets_the_views_answer(site, body, headers, status):
    _, (key_on, key_off), env = site
    with daphne_processes(1, env=env) as (on,), daphne_processes(1, env={**env, "DB_LOOP_POOL_MAX": "0"}) as (off,):
        for base, key in ((on, key_on), (off, key_off)):  # warm: the key, the pair, the closed range
            for _ in range(2):
                assert _post(base, key, "candlestick", CLOSED)[0] == 200
        answers = _post(on, key_on, "candlestick", body, **headers), _post(off, key_off, "candlestick", body, **headers)
    assert answers[0][0] == answers[1][0] == status
    if status == 200:  # the answer has today's bar, which the simulator may move between the two reads
        answers = [(s, b"", h) for s, _, h in answers]
    assert answers[0] == answers[1]


def test_two_processes_count_loop_answers_exactly(site):
    _, (key, _), env = site
    processes, clients, requests = 2, 20, 20
    warm_bytes = 0
    with daphne_processes(processes, env=env) as urls:
        for base in urls:
            for _ in range(2):
                status, body, _ = _post(base, key, "candlestick", CLOSED)
                assert status == 200
                warm_bytes += len(body)

        def client_run(n: int) -> int:
            served = 0
            with httpx.Client(base_url=urls[n % processes], timeout=60,
                              headers={"Authorization": f"Bearer {key}"}) as http:
                for i in range(requests):
                    body = {**CLOSED, "format": "toon"} if (n + i) % 3 == 0 else CLOSED
                    response = http.post("/api/v1/market/candlestick", json=body)
                    assert response.status_code == 200
                    served += len(response.content)
            return served

        with ThreadPoolExecutor(processes * clients) as pool:
            served = sum(pool.map(client_run, range(processes * clients)))
    month = UsageCounter.objects.get(account__api_keys__lookup_id=key[9:21], period="month")
    assert month.requests == 2 * processes + processes * clients * requests
    assert month.bytes == warm_bytes + served
    day = UsageCounter.objects.get(account__api_keys__lookup_id=key[9:21], period="day")
    assert (day.requests, day.bytes) == (month.requests, month.bytes)


def test_concurrent_loop_answers_stop_exactly_at_the_quota_with_429s(site, plans):
    _, (key, _), env = site
    plan = plan_upsert(name="tiny", features=["api", "streaming"], monthly_requests=41, monthly_bytes=10**12)
    from accounts.models import ApiKey

    account = ApiKey.objects.get(lookup_id=key[9:21]).account
    account.plan = plan
    account.save()
    with daphne_processes(2, env=env) as urls:
        for base in urls:
            for _ in range(2):
                assert _post(base, key, "candlestick", CLOSED)[0] == 200

        def hit(n):
            return httpx.post(f"{urls[n % 2]}/api/v1/market/candlestick", json=CLOSED, timeout=60,
                              headers={"Authorization": f"Bearer {key}"})

        with ThreadPoolExecutor(40) as pool:
            responses = list(pool.map(hit, range(100)))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 37 and statuses.count(429) == 63
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["code"] == "quota_exceeded" and int(refused.headers["Retry-After"]) >= 1
    assert UsageCounter.objects.get(account=account, period="month").requests == 41


def test_a_corrected_closed_day_reaches_the_loops_answers_within_a_second(site):
    pair, (key, _), env = site
    day = TODAY - timedelta(days=2)
    day_ms = int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)
    with daphne_processes(1, env=env) as (on,):
        def opens():
            status, body, _ = _post(on, key, "candlestick", CLOSED)
            assert status == 200
            import json

            return {row["date"]: row["open"] for row in json.loads(body)["data"]}[day.isoformat()]

        for _ in range(3):
            opens()
        DayBar.objects.filter(pair=pair, ts_ms=day_ms).update(open=12345.5)
        eventually(opens, 12345.5, within=1.0)


def _hourly(start, end, **extra) -> dict:
    return {"exchange": "binance", "symbol": "BTC-USDT", "start": start.isoformat(), "end": end.isoformat(),
            "resolution": "hourly", **extra}


EDGES = [
    ("candlestick", _hourly(TODAY - timedelta(days=30), TODAY - timedelta(days=1)), {}),  # 720 hours, closed
    ("candlestick", _hourly(TODAY - timedelta(days=30), TODAY - timedelta(days=1), format="toon"), {}),
    ("candlestick", _hourly(TODAY - timedelta(days=1), TODAY), {}),  # the current hour included
    ("candlestick", _hourly(TODAY - timedelta(days=1), TODAY, format="toon"), {}),
    ("trades", {**CLOSED, "end": TODAY.isoformat()}, {}),  # today's day bar included
    ("spread", _hourly(TODAY, TODAY), {"Accept": "application/toon"}),
    ("limit-orders", _hourly(TODAY - timedelta(days=2), TODAY, side="ask"), {}),
    ("candlestick", _hourly(TODAY.replace(year=2020), TODAY.replace(year=2020)), {}),  # no bars in the range
    ("candlestick", {**CLOSED, "start": "2020-01-01", "end": "2020-01-31", "format": "toon"}, {}),
    ("candlestick", {**CLOSED, "symbol": "SOL-USDT"}, {}),  # a pair without data
    ("trades", _hourly(TODAY - timedelta(days=1), TODAY, symbol="SOL-USDT", format="toon"), {}),
]


def test_the_loop_reads_any_range_and_answers_exactly_as_the_view_does(site):
    """Ranges the loop reads itself (longer than a reused answer held before, reaching into
    the current hour, empty, of a pair without data) in both formats: the view's status,
    body and headers, byte for byte."""
    from market.bars import floor_ms
    from market.services import bars_write
    from tests.market.test_bar_store import trade_bar

    pair, (key_on, key_off), env = site
    bars_write(pair=pair, granularity="hour", bars=[trade_bar(floor_ms(now_ms(), "hour"), [40000.5, 40001.25])])
    with daphne_processes(1, env=env) as (on,), daphne_processes(1, env={**env, "DB_LOOP_POOL_MAX": "0"}) as (off,):
        for path, body, headers in EDGES:
            for _ in range(3):  # the first of each is the view's (the pair not read yet), then the loop's
                answers = _post(on, key_on, path, body, **headers), _post(off, key_off, path, body, **headers)
                assert answers[0] == answers[1], (path, body, headers)
                assert answers[0][0] == 200
        assert loop_connections() >= 1
    assert b"40001.25" in _post_once(env, key_on, "candlestick", EDGES[2][1])


def _post_once(env, key, path, body) -> bytes:
    with daphne_processes(1, env=env) as (on,):
        for _ in range(2):
            status, content, _ = _post(on, key, path, body)
            assert status == 200
    return content
