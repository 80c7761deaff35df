"""Ingestion's process loop: every ingestion process (each Celery worker process in the
full mode, the server's thread in embedded mode) runs `run_loop` for its lifetime; each
tick it holds its fair share of the wanted pairs (streaming.leases) and ingests them all
in one tick (streaming.ingestor.ingest_tick), reading live feeds ahead between ticks.
Wanting a pair (a subscription) starts its ingestion here."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from django.conf import settings
from django.db import close_old_connections, transaction

from config import clock
from market.models import Pair

from . import live
from .ingestor import PairIngestor, TickOutcome, ingest_tick
from .leases import (handovers_prepare, leases_claim, pair_looked_up, retire_unwanted, wanted_pair_ids,
                     worker_heartbeat, worker_leave)
from .models import IngestionState

logger = logging.getLogger(__name__)


def new_owner_id(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# -- wanting a pair ------------------------------------------------------------------------

def ingestion_want(*, pair: Pair) -> IngestionState:
    """Someone subscribes: make sure the pair is ingested (starting it if nobody was)."""
    state, _ = IngestionState.objects.get_or_create(pair=pair)
    if not state.wanted or state.unwanted_since:
        IngestionState.objects.filter(pk=state.pk).update(wanted=True, unwanted_since=None)
        state.refresh_from_db()
    if state.fatal:
        return state
    transaction.on_commit(lambda: _kick(pair.pk))
    return state


def ingestion_unwant(*, pair: Pair) -> None:
    """The last subscriber left: ingestion stops after the grace period."""
    IngestionState.objects.filter(pair=pair, wanted=True, unwanted_since__isnull=True).update(
        unwanted_since=clock.utcnow())


def _kick(pair_id: int) -> None:
    """Embedded mode: make sure the server's ingestion thread runs. In the full mode every
    worker process's loop looks for wanted pairs each tick: nothing to send."""
    if settings.INGESTION_AUTOSTART and settings.INGESTION_IN_PROCESS and EmbeddedIngestion.serving:
        # a command (seed_demo, the shell) leaves ingestion to the server
        EmbeddedIngestion.ensure_started()


# -- the process loop -------------------------------------------------------------------------

def record_failure(pair_id: int, exc: BaseException, *, fatal: bool = False) -> None:
    IngestionState.objects.filter(pair_id=pair_id).update(
        last_error=f"{type(exc).__name__}: {exc}"[:2000], last_error_at=clock.utcnow(), fatal=fatal)


def run_loop(*, owner: str, stop: threading.Event | None = None, tick_seconds: float = 1.0,
             join_seconds: float = 0.0) -> None:
    """The ingestion loop of one process, until `stop` is set: every tick it says it runs,
    holds its fair share of the wanted pairs (leases_claim) and ingests them all in one
    tick (ingest_tick). On the way out it releases its leases and leaves, so the other
    processes take its pairs over at once."""
    ingestors: dict[int, PairIngestor] = {}
    pairs: dict[int, Pair] = {}
    announced: dict[int, str] = {}
    next_announce = 0.0
    if join_seconds:  # processes started together see each other before they share the pairs out
        close_old_connections()
        try:
            worker_heartbeat(owner=owner)
        except Exception:
            logger.exception("Could not announce the ingestion process")
        finally:
            close_old_connections()
        (stop or threading.Event()).wait(join_seconds)
    try:
        while not (stop and stop.is_set()):
            started = time.monotonic()
            close_old_connections()
            try:
                retire_unwanted()
                alive = worker_heartbeat(owner=owner)
                owned = leases_claim(owner=owner, alive=alive, wanted=wanted_pair_ids())
                handovers_prepare(owner=owner, pairs=pairs)
                for pair_id in owned:
                    if pair_id not in ingestors:
                        ingestors[pair_id] = PairIngestor(pair_looked_up(pairs, pair_id), owner)
                for gone in set(ingestors) - set(owned):
                    ingestors.pop(gone)
                try:
                    outcome = ingest_tick([ingestors[p] for p in owned], clock.now_ms() - settings.INGESTION_LAG_MS,
                                          alive=alive)
                except Exception as exc:  # a tick of one pair raises what its write raised
                    if len(owned) != 1:
                        raise
                    outcome = TickOutcome(failed={owned[0]: exc})
                for pair_id in outcome.lost | outcome.handed_over:
                    ingestors.pop(pair_id, None)
                for pair_id, exc in outcome.failed.items():
                    logger.error("Ingestion step failed for pair %s", pair_id, exc_info=exc)
                    record_failure(pair_id, exc, fatal=_is_fatal(exc))
                if time.monotonic() >= next_announce:
                    next_announce = time.monotonic() + settings.INGESTION_STATUS_EVERY_SECONDS
                    announce_state_changes(ingestors, announced)
            except Exception:
                logger.exception("Ingestion loop iteration failed; retrying")
            finally:
                close_old_connections()
            _wait_reading_ahead(ingestors, _until_next_tick(tick_seconds, time.monotonic() - started), stop)
    finally:
        try:
            worker_leave(owner=owner)
        finally:
            close_old_connections()


# A second can be closed once INGESTION_LAG_MS have passed after its end (a live feed vouches
# for its time that much behind now, in the exchange's clock, which runs a few milliseconds
# behind ours on a near exchange); ticks fire this long after that moment, so a second is
# stored about INGESTION_LAG_MS + this + the tick's own time after it ends, not up to a
# whole tick later on top.
TICK_AFTER_CLOSE_MS = 100


def _until_next_tick(tick_seconds: float, elapsed: float) -> float:
    """Seconds to wait for the next tick: until the next moment a second becomes closable
    (plus TICK_AFTER_CLOSE_MS); after a tick that ran a whole period, 50 ms (it is behind)."""
    period_ms = int(tick_seconds * 1000)
    if period_ms <= 0 or elapsed * 1000 >= period_ms:
        return 0.05
    phase = (settings.INGESTION_LAG_MS + TICK_AFTER_CLOSE_MS) % period_ms
    return max((phase - time.time() * 1000) % period_ms, 1) / 1000


def _wait_reading_ahead(ingestors: dict[int, PairIngestor], wait: float, stop: threading.Event | None) -> None:
    """Wait `wait` seconds for the next tick, reading the live pairs' events ahead of it
    every INGESTION_READ_AHEAD_MS (PairIngestor.read_ahead)."""
    deadline = time.monotonic() + wait
    period = settings.INGESTION_READ_AHEAD_MS / 1000
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (stop and stop.is_set()):
            return
        nap = min(left, period) if period > 0 else left
        if stop:
            stop.wait(nap)
        else:
            time.sleep(nap)
        if period > 0 and deadline - time.monotonic() > READ_AHEAD_BEFORE_TICK_S:
            now_ms = clock.now_ms()
            for ingestor in list(ingestors.values()):
                try:
                    ingestor.read_ahead(now_ms)
                except Exception:  # the tick meets the same failure and records it
                    logger.debug("reading ahead failed for %s", ingestor.pair, exc_info=True)
                    ingestor.reset()


# Right before a tick the tick itself reads: a read ahead would only delay it.
READ_AHEAD_BEFORE_TICK_S = 0.03


def announce_state_changes(ingestors: dict[int, PairIngestor], announced: dict[int, str]) -> None:
    """Tell the live feed when a pair's derived state changed since the last look."""
    from .selectors import pair_status, pairs_signals

    signals = pairs_signals(pairs=[ingestor.pair for ingestor in ingestors.values()], now=clock.now_ms())
    for pair_id, ingestor in ingestors.items():
        status = pair_status(pair=ingestor.pair, account=None, subscribed=None, signals=signals[pair_id])
        if announced.get(pair_id) != status["state"]:
            announced[pair_id] = status["state"]
            status.pop("subscribed", None)
            live.publish_status(pair_id=pair_id, status=status)


def _is_fatal(exc: BaseException) -> bool:
    return type(exc).__name__ == "SourceFatalError"


class EmbeddedIngestion:
    """The in-process ingestion thread of embedded mode (no broker), run by the server
    process (config/asgi.py sets `serving`). A management command that subscribes does not
    start one: a thread of a short-lived process would take the leases and die with it,
    and the server would wait for them to lapse."""

    serving = False
    _thread: threading.Thread | None = None
    _stop = threading.Event()
    _lock = threading.Lock()

    @classmethod
    def ensure_started(cls) -> None:
        with cls._lock:
            if cls._thread is not None and cls._thread.is_alive():
                return
            cls._stop.clear()
            owner = new_owner_id("embedded")
            cls._thread = threading.Thread(target=run_loop, name="ingestion", daemon=True,
                                           kwargs={"owner": owner, "stop": cls._stop})
            cls._thread.start()

    @classmethod
    def stop(cls, timeout: float = 10) -> None:
        cls._stop.set()
        if cls._thread is not None:
            cls._thread.join(timeout)
