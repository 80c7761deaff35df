"""Celery tasks: thin wrappers around streaming.ingestion."""

import threading

from celery import shared_task
from celery.signals import worker_shutting_down
from django.conf import settings

from . import ingestion

# Set when this worker begins its shutdown (SIGTERM of a deploy, Ctrl-C): the ingestion
# loops running in its threads stop at once instead of holding their pairs for the rest of
# their lifetime, which a warm shutdown would wait out. The worker runs the threads pool
# (Procfile): with a process pool the tasks would not be in the process that gets the signal.
worker_stopping = threading.Event()


@worker_shutting_down.connect
def _stop_ingestion(**_kwargs) -> None:
    worker_stopping.set()


@shared_task(name="streaming.ingest_pairs", ignore_result=True)
def ingest_pairs(pair_ids: list[int]) -> None:
    """Own these pairs for one lifetime (or until this worker shuts down), then hand them
    to a fresh task if still wanted: on a shutdown it runs on another worker."""
    owner = ingestion.new_owner_id("celery")
    owned = ingestion.run_loop(owner=owner, pair_ids=pair_ids, stop=worker_stopping,
                               lifetime_seconds=settings.INGESTION_TASK_LIFETIME_SECONDS)
    wanted = set(ingestion.wanted_pair_ids())
    # shutting down, the pairs it was given go on (a task that arrived during the shutdown
    # owned none); a pair that another worker holds keeps its owner, the copy gives up
    handed_on = pair_ids if worker_stopping.is_set() else owned
    still_wanted = [p for p in handed_on if p in wanted]
    if still_wanted:
        ingest_pairs.delay(still_wanted)


@shared_task(name="streaming.supervise_ingestion", ignore_result=True)
def supervise_ingestion() -> int:
    """Re-queue every wanted pair whose lease ran out (its worker died or was never started)."""
    ingestion.retire_unwanted()
    orphans = ingestion.pairs_needing_a_worker()
    size = settings.INGESTION_PAIRS_PER_TASK
    for first in range(0, len(orphans), size):
        ingest_pairs.delay(orphans[first:first + size])
    return len(orphans)
