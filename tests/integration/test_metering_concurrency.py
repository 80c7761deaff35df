"""Counting stays exact with several server processes and many concurrent clients, with
both ways of counting mixed: before the view (then the body after it) and when served
(request and body in one statement)."""

import random
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from billing.models import UsageCounter

from .servers import daphne_processes, database_url_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PROCESSES, CLIENTS_PER_PROCESS, REQUESTS_PER_CLIENT = 2, 50, 20
ROWS_COUNTED_BEFORE, ROWS_COUNTED_WHEN_SERVED = "/api/v1/test/rows", "/api/v1/test/rows-when-served"


def test_two_processes_fifty_clients_each_count_exactly(make_account):
    account = make_account()
    key = api_key_create(account=account, name="load").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(PROCESSES, env=env) as urls:
        def client_run(client_number: int) -> tuple[int, int, list[int]]:
            base = urls[client_number % len(urls)]
            rng = random.Random(client_number)
            served, statuses = 0, []
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
                for _ in range(REQUESTS_PER_CLIENT):
                    accept = rng.choice(["application/json", "application/toon"])
                    route = rng.choice([ROWS_COUNTED_BEFORE, ROWS_COUNTED_WHEN_SERVED])
                    response = http.get(f"{route}?rows={rng.randint(0, 40)}", headers={"Accept": accept})
                    statuses.append(response.status_code)
                    served += len(response.content)
            return REQUESTS_PER_CLIENT, served, statuses

        with ThreadPoolExecutor(PROCESSES * CLIENTS_PER_PROCESS) as pool:
            results = list(pool.map(client_run, range(PROCESSES * CLIENTS_PER_PROCESS)))

    statuses = [s for _, _, batch in results for s in batch]
    assert set(statuses) == {200}
    month = UsageCounter.objects.get(account=account, period="month")
    assert month.requests == PROCESSES * CLIENTS_PER_PROCESS * REQUESTS_PER_CLIENT == 2000
    assert month.bytes == sum(served for _, served, _ in results)
    day = UsageCounter.objects.get(account=account, period="day")
    assert (day.requests, day.bytes) == (month.requests, month.bytes)


def test_concurrent_requests_at_the_limit_never_overshoot(make_account, plans):
    from billing.services import plan_upsert

    plan = plan_upsert(name="tiny", features=["api", "streaming"], monthly_requests=37, monthly_bytes=10**12)
    account = make_account()
    account.plan = plan
    account.save()
    key = api_key_create(account=account, name="load").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(2, env=env) as urls:
        def hit(n):
            route = (ROWS_COUNTED_BEFORE, ROWS_COUNTED_WHEN_SERVED)[n // 2 % 2]
            return httpx.get(f"{urls[n % 2]}{route}?rows=1",
                             headers={"Authorization": f"Bearer {key}"}, timeout=60).status_code

        with ThreadPoolExecutor(40) as pool:
            statuses = list(pool.map(hit, range(100)))
    assert statuses.count(200) == 37 and statuses.count(429) == 63
    assert UsageCounter.objects.get(account=account, period="month").requests == 37


def test_answers_counted_together_stop_exactly_at_the_byte_limit_each_with_its_own_counts(make_account, plans):
    """Answers counted when served, many at once on two processes: the ones a process
    counts together in one statement pass only if each would have passed in turn."""
    from billing.services import plan_upsert

    account = make_account()
    key = api_key_create(account=account, name="load").plaintext
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(2, env=env) as urls:
        size = len(httpx.get(f"{urls[0]}{ROWS_COUNTED_WHEN_SERVED}?rows=3",
                             headers={"Authorization": f"Bearer {key}"}, timeout=60).content)
        # served while the month's bytes before it are under the limit: 30 more answers
        account.plan = plan_upsert(name="tiny", features=["api", "streaming"], monthly_requests=10**6,
                                   monthly_bytes=30 * size + size // 2)
        account.save()
        time.sleep(settings.ACCOUNT_CACHE_SECONDS + 0.5)  # both processes see the new plan

        def hit(n):
            return httpx.get(f"{urls[n % 2]}{ROWS_COUNTED_WHEN_SERVED}?rows=3",
                             headers={"Authorization": f"Bearer {key}"}, timeout=60)

        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(hit, range(150)))
    served = [a for a in answers if a.status_code == 200]
    assert len(served) == 30 and {a.status_code for a in answers} == {200, 429}
    assert sorted(int(a.headers["X-Quota-Requests-Used"]) for a in served) == list(range(2, 32))
    assert sorted(int(a.headers["X-Quota-Bytes-Used"]) for a in served) == [size * n for n in range(2, 32)]
    month = UsageCounter.objects.get(account=account, period="month")
    assert (month.requests, month.bytes) == (31, 31 * size)
