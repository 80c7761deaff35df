"""Celery tasks: thin wrappers around streaming.ingestion."""

from celery import shared_task
from django.conf import settings

from . import ingestion


@shared_task(name="streaming.ingest_pairs", ignore_result=True)
def ingest_pairs(pair_ids: list[int]) -> None:
    """Own these pairs for one lifetime, then hand them to a fresh task if still wanted."""
    owner = ingestion.new_owner_id("celery")
    owned = ingestion.run_loop(owner=owner, pair_ids=pair_ids,
                               lifetime_seconds=settings.INGESTION_TASK_LIFETIME_SECONDS)
    wanted = set(ingestion.wanted_pair_ids())
    still_wanted = [p for p in owned if p in wanted]
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
