"""kill -9 of the Celery worker that ingests a simulated pair, several times, at moments
chosen at random and inside open ingestion transactions; a fresh worker takes over each time
through the lease and the supervisor. Afterwards the stored second bars of the covered span
are exactly the simulator's (no second missing, none twice, none altered), no scheme event
is stored twice, and nothing live was published twice.

The simulator is a pure function of (seed, pair, time), so the expectation is computed here,
in the test process, from the same source: bars by one uninterrupted BarBuilder pass, scheme
events by one uninterrupted detector run over the same span (a new worker restores the
detectors' checkpoint and replays to the cursor, so it must find exactly that). A failure
says whether the difference is what cold warm-ups at the takeovers would give instead.

Redis (broker and pub/sub) is a private redis-server of this test, so the live channel seen
here carries this test's events only."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter

import orjson
import pytest
from django.db import connection

from market.bars import BAR_FIELDS, floor_ms
from market.models import MinuteBar, Pair
from tests.second_bars import first_second
from market.services import catalog_seed_demo
from schemes.models import SchemeEvent
from streaming.hub import redis_channel
from streaming.models import IngestionState
from streaming.services import subscription_upsert
from streaming.sources import pair_ref, source_for

from .faults import kill9, private_redis, wait_for
from .servers import database_url_for
from .workers import assert_second_bars_are_the_simulators, celery_worker, supervise_now

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

KILLS = 4
LEASE_SECONDS = 5
WARMUP_MINUTES = 10
# A simulator of its own (the source is built once per process and seed) with an episode a
# minute, so the covered ten-odd minutes hold enough scheme events to compare.
SIMULATOR = {"SIMULATOR_SEED": 4242, "SIMULATOR_EPISODES_PER_HOUR": 60.0}


class LiveChannel:
    """Every message published on the live-events channel of a Redis, collected in a thread."""

    def __init__(self, url: str):
        import redis

        self._pubsub = redis.Redis.from_url(url).pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(redis_channel(url))
        self.messages: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.2)
            if message and message["type"] == "message":
                self.messages.append(orjson.loads(message["data"]))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self._pubsub.close()


def _state(pair) -> IngestionState:
    return IngestionState.objects.get(pair=pair)


def _open_ingestion_transaction() -> bool:
    """Whether another session of this database is inside an open transaction (the only
    explicit transactions the worker opens are ingestion steps)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND state = 'idle in transaction'")
        return cursor.fetchone()[0] > 0


def _detections(source, ref, points: list[int], end: int) -> dict[tuple, int]:
    """(scheme, side, build_start_ms) -> ts_ms of what ingestion stores when a fresh
    detector engine is warmed up cold (SCHEMES_WARMUP_MINUTES of the past) at each of
    `points` and fed live up to `end`: the first warm-up's findings kept (a new pair's
    recent history), later ones' not (they re-cover time live detection already covered)."""
    from django.conf import settings

    from schemes.detection import PairDetection

    found: dict[tuple, int] = {}

    def keep(items):
        for item in items:
            key = (item["scheme"], item["side"], int((item.get("build") or {}).get("start_ms", item["ts_ms"])))
            found.setdefault(key, int(item["ts_ms"]))

    bounds = points + [end]
    for number, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        detection = PairDetection(ref, source)
        warm_from = floor_ms(start - settings.SCHEMES_WARMUP_MINUTES * 60_000, "minute")
        replayed = [item for event in source.events(ref, warm_from, start) for item in detection.feed(event)]
        if number == 0:
            keep(replayed)
        for event in source.events(ref, start, stop):
            keep(detection.feed(event))
    return found


def test_kill_9_of_ingestion_workers_mid_batch_loses_and_repeats_no_bar_and_no_scheme_event(make_account, settings):
    settings.SCHEMES_WARMUP_MINUTES = WARMUP_MINUTES  # the expectations below use the workers' values
    for name, value in SIMULATOR.items():
        setattr(settings, name, value)
    catalog_seed_demo()
    pair = Pair.objects.select_related("exchange", "base", "quote").get(
        exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    kills: list[dict] = []  # what each kill hit, for the failure messages

    with private_redis() as redis_server, LiveChannel(redis_server.url) as channel:
        env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": redis_server.url,
               "CELERY_BROKER_URL": redis_server.url, "CELERY_TASK_ALWAYS_EAGER": "false",
               "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "false",
               "INGESTION_LEASE_SECONDS": str(LEASE_SECONDS), "INGESTION_BACKFILL_HOURS": "1",
               "INGESTION_TASK_LIFETIME_SECONDS": "3600", "SCHEMES_DETECTION": "true",
               "SCHEMES_WARMUP_MINUTES": str(WARMUP_MINUTES), **{k: str(v) for k, v in SIMULATOR.items()}}
        subscription_upsert(account=make_account(), pair=pair, metrics=["trade", "book", "quote"])
        takeovers: list[int] = []  # the committed cursor each new worker starts from
        for number in range(KILLS):
            # The dead worker's lease runs out; then a fresh worker takes the pair over.
            wait_for(lambda: (s := _state(pair)).lease_until is None or s.lease_until.timestamp() < time.time(),
                     timeout=LEASE_SECONDS + 10, message="the dead worker's lease to run out")
            before = _state(pair)
            with celery_worker(env=env, concurrency=4) as worker:
                supervise_now(redis_server.url)
                wait_for(lambda: (s := _state(pair)).lease_owner and s.lease_owner != before.lease_owner,
                         timeout=60, message=f"worker {number + 1} taking the lease")
                if before.cursor_ms is None:  # the first worker: let it commit its backfill first
                    wait_for(lambda: _state(pair).cursor_ms is not None, timeout=60, message="the first commit")
                else:
                    takeovers.append(before.cursor_ms)
                resumed_from = before.cursor_ms or _state(pair).cursor_ms
                if number % 2 == 0:  # inside an ingestion transaction (catch-up after the gap: a big batch)
                    mid_transaction = wait_for(_open_ingestion_transaction, timeout=30, interval=0.005,
                                               message="an open ingestion transaction")
                else:  # at a random moment once the worker ingests live
                    try:
                        wait_for(lambda: _state(pair).cursor_ms > time.time() * 1000 - 3_000, timeout=60,
                                 message="ingestion catching up with the present")
                    except TimeoutError:
                        state = _state(pair)
                        pytest.fail(f"worker {number + 1} did not catch up: cursor {state.cursor_ms} is "
                                    f"{time.time() * 1000 - state.cursor_ms:.0f} ms behind, last error "
                                    f"{state.last_error!r}, seed {seed}, kills so far {kills}")
                    time.sleep(rng.uniform(0.2, 2.5))
                    mid_transaction = _open_ingestion_transaction()
                kill9(worker)
            after = _state(pair)
            kills.append({"worker": number + 1, "in_transaction": mid_transaction, "from": resumed_from,
                          "cursor": after.cursor_ms, "error": after.last_error})
            assert worker.returncode == -9

    final = _state(pair)
    assert not final.last_error, final.last_error
    source, ref = source_for(pair), pair_ref(pair)
    # The first step placed the cursor (on a minute) and built second bars from there on.
    start, end = first_second(pair), final.cursor_ms
    context = f"seed {seed}, kills {kills}"
    assert sum(k["in_transaction"] for k in kills) >= KILLS // 2, context
    assert end - start >= 5 * 60_000, context  # the catch-up and some live seconds were covered

    rows = assert_second_bars_are_the_simulators(pair, start, end, context)
    # Their roll-ups count every second once.
    for minute in MinuteBar.objects.filter(pair=pair, ts_ms__gte=start, ts_ms__lt=floor_ms(end, "minute")):
        seconds = [row for row in rows if minute.ts_ms <= row[0] < minute.ts_ms + 60_000]
        assert minute.book_samples == 60 and minute.trade_count == sum(
            row[BAR_FIELDS.index("trade_count")] for row in seconds), (context, minute.ts_ms)

    # Scheme events: stored once each, exactly what one uninterrupted detector run finds.
    stored = {(e.scheme, e.side, e.build_start_ms): e.ts_ms for e in SchemeEvent.objects.filter(pair=pair)}
    assert len(stored) == SchemeEvent.objects.filter(pair=pair).count()
    uninterrupted = _detections(source, ref, [start], end)
    assert len(uninterrupted) >= 5, context  # the detectors find episodes here: the check is not vacuous
    if stored != uninterrupted:
        def differences(expected: dict) -> str:
            extra = sorted(set(stored.items()) - set(expected.items()))
            lost = sorted(set(expected.items()) - set(stored.items()))
            return f"stored but not expected {extra[:5]}, expected but not stored {lost[:5]}"

        cold = _detections(source, ref, [start, *takeovers], end)  # detector state rebuilt, not restored
        hint = ("they are exactly what cold warm-ups at the takeovers find: detector state was not restored"
                if stored == cold else f"against cold warm-ups at the takeovers: {differences(cold)}")
        pytest.fail(f"{context}: scheme events differ from an uninterrupted run: {differences(uninterrupted)}; {hint}")

    # The live channel: no bar and no scheme event was published twice.
    published = [m for m in channel.messages if m["c"] == f"pair-{pair.pk}"]
    bar_times = Counter(row["ts_ms"] for m in published if m["t"] == "bars" for row in m["d"]["rows"])
    scheme_ids = Counter(m["d"]["id"] for m in published if m["t"] == "scheme-event")
    assert bar_times and max(bar_times.values()) == 1, context
    assert not scheme_ids or max(scheme_ids.values()) == 1, context
    assert set(scheme_ids) <= set(SchemeEvent.objects.filter(pair=pair).values_list("id", flat=True))
