"""A deploy stops a Celery worker with SIGTERM: the worker ingesting a pair stops its
ingestion loop, releases the lease and hands the pair on at once, so another worker ingests
it within seconds (not when the 30 s lease lapses), the stopped worker exits promptly (not
after the ingestion task's lifetime), and the stored second bars have no second missing
and none twice across the handover."""

from __future__ import annotations

import signal
import time

import pytest
from django.db import connection

from market.models import Pair
from tests.second_bars import first_second
from market.services import catalog_seed_demo
from streaming.models import IngestionState
from streaming.services import subscription_upsert

from .faults import private_redis, wait_for
from .servers import database_url_for
from .workers import assert_second_bars_are_the_simulators, celery_worker, supervise_now

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 30  # a lapse would take this long: the handover must not wait for it
HANDOVER_SECONDS = 10


def _state(pair) -> IngestionState:
    return IngestionState.objects.get(pair=pair)


def _owner_pid(state: IngestionState) -> int | None:
    """The process id in a Celery lease owner ("celery:<host>:<pid>:<nonce>")."""
    parts = state.lease_owner.split(":")
    return int(parts[2]) if len(parts) == 4 and parts[0] == "celery" else None


def _live(pair) -> bool:
    cursor = _state(pair).cursor_ms
    return cursor is not None and cursor > time.time() * 1000 - 3_000


def test_a_worker_stopped_with_sigterm_hands_its_pairs_to_another_within_seconds(make_account):
    catalog_seed_demo()
    pair = Pair.objects.select_related("exchange", "base", "quote").get(
        exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    with private_redis() as redis_server:
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": redis_server.url,
               "CELERY_BROKER_URL": redis_server.url, "CELERY_TASK_ALWAYS_EAGER": "false",
               "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "false",
               "INGESTION_LEASE_SECONDS": str(LEASE_SECONDS), "INGESTION_BACKFILL_HOURS": "1",
               "INGESTION_EVENT_BACKFILL_MINUTES": "1", "INGESTION_TASK_LIFETIME_SECONDS": "3600"}
        subscription_upsert(account=make_account(), pair=pair, metrics=["trade", "book", "quote"])
        with celery_worker(env=env, concurrency=4) as first, \
                celery_worker(env=env, beat=False, concurrency=4) as second:
            supervise_now(redis_server.url)
            owner_pid = wait_for(lambda: _owner_pid(_state(pair)), timeout=60, message="a worker taking the lease")
            holder, other = (first, second) if owner_pid == first.pid else (second, first)
            assert owner_pid == holder.pid
            wait_for(lambda: _live(pair), timeout=90, message="ingestion catching up with the present")

            holder.send_signal(signal.SIGTERM)
            stopped_at = time.monotonic()
            cursor_at_stop = _state(pair).cursor_ms
            wait_for(lambda: _owner_pid(s := _state(pair)) == other.pid and s.cursor_ms > cursor_at_stop,
                     timeout=HANDOVER_SECONDS, interval=0.05,
                     message=f"the other worker ingesting the pair within {HANDOVER_SECONDS} s of the SIGTERM")
            handover_seconds = time.monotonic() - stopped_at
            holder.wait(timeout=15)  # a warm shutdown that no longer waits out the task's lifetime
            assert holder.returncode == 0
            wait_for(lambda: _state(pair).cursor_ms >= time.time() * 1000 - 3_000 and
                     _state(pair).cursor_ms >= cursor_at_stop + 5_000,
                     timeout=30, message="the new worker ingesting live")
            end = _state(pair).cursor_ms
            assert other.poll() is None

    state = _state(pair)
    assert not state.last_error, state.last_error
    # from the first second bar: the comparison's bar builder starts where ingestion did
    start = first_second(pair)
    context = f"handover in {handover_seconds:.1f} s, span {start}..{end}, SIGTERM at cursor {cursor_at_stop}"
    assert_second_bars_are_the_simulators(pair, start, end, context)
