"""Ingestion processes share the pairs through the leases, on real processes: two Celery
workers split the wanted pairs within 10 %, a third that joins gets its share handed over
within 60 s, and the pairs of one killed with kill -9 are taken over once its leases lapse.
Across every move each pair's stored seconds are exactly one uninterrupted run's: none
missing, none twice."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from market.models import Pair
from market.services import catalog_seed_demo
from streaming.models import IngestionState
from streaming.services import subscription_upsert

from .faults import kill9, private_redis, wait_for
from .servers import database_url_for
from .workers import assert_second_bars_are_the_simulators, celery_worker

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 8


def owners_by_pid() -> dict[int, int]:
    """Pairs held per worker process ("celery:<host>:<pid>:<nonce>" owners)."""
    counts: dict[int, int] = {}
    for owner in IngestionState.objects.filter(wanted=True).values_list("lease_owner", flat=True):
        if owner:
            pid = int(owner.split(":")[2])
            counts[pid] = counts.get(pid, 0) + 1
    return counts


def split_evenly(pids: list[int], total: int):
    """The pairs split among exactly these processes, each within 10 % of an even share."""
    counts = owners_by_pid()
    even = total / len(pids)
    if set(counts) == set(pids) and sum(counts.values()) == total and \
            all(abs(n - even) <= max(0.1 * even, 1) for n in counts.values()):
        return counts
    return None


def test_ingestion_processes_share_the_pairs_and_take_over_joins_and_kills_losing_no_second(make_account):
    pairs = list(Pair.objects.filter(pk__in=[p.pk for p in catalog_seed_demo()]).select_related(
        "exchange", "base", "quote"))
    account = make_account()
    for pair in pairs:
        subscription_upsert(account=account, pair=pair, metrics=["trade", "book", "quote"])
    total = len(pairs)
    with private_redis() as redis_server:
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": redis_server.url,
               "CELERY_BROKER_URL": redis_server.url, "CELERY_TASK_ALWAYS_EAGER": "false",
               "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "false",
               "INGESTION_LEASE_SECONDS": str(LEASE_SECONDS), "INGESTION_BACKFILL_HOURS": "1",
               "INGESTION_EVENT_BACKFILL_MINUTES": "1", "SCHEMES_DETECTION": "false"}
        with celery_worker(env=env, concurrency=2) as first, celery_worker(env=env, beat=False, concurrency=2) as second:
            two = wait_for(lambda: split_evenly([first.pid, second.pid], total), timeout=60,
                           message=f"two processes splitting {total} pairs evenly")
            wait_for(lambda: all(s.cursor_ms and s.cursor_ms > time.time() * 1000 - 4_000
                                 for s in IngestionState.objects.filter(wanted=True)),
                     timeout=90, message="every pair ingested live")
            with celery_worker(env=env, beat=False, concurrency=2) as third:
                joined_at = time.monotonic()
                three = wait_for(lambda: split_evenly([first.pid, second.pid, third.pid], total), timeout=60,
                                 interval=0.5, message="the joining process taking its share within 60 s")
                join_seconds = time.monotonic() - joined_at
                time.sleep(3)
                kill9(second)
                killed_at = time.monotonic()
                after_kill = wait_for(lambda: split_evenly([first.pid, third.pid], total),
                                      timeout=LEASE_SECONDS + 20, interval=0.5,
                                      message="the killed process's pairs taken over once its leases lapse")
                takeover_seconds = time.monotonic() - killed_at
                time.sleep(3)
                ends = {s.pair_id: s.cursor_ms for s in IngestionState.objects.filter(wanted=True)}
    assert two and three and after_kill
    assert join_seconds < 60 and takeover_seconds < LEASE_SECONDS + 20
    from tests.second_bars import first_second

    for pair in pairs:
        start = first_second(pair)
        assert start is not None and ends[pair.pk] - start > 30_000, pair
        assert_second_bars_are_the_simulators(pair, start, ends[pair.pk], f"{pair}: {two} -> {three} -> {after_kill}")
