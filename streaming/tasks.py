"""Celery: every worker process runs one ingestion loop (streaming.ingestion.run_loop)
from its start to its shutdown, holding its fair share of the wanted pairs; beat retires
pairs nobody wants any more. Tasks here are thin wrappers around streaming.ingestion and
streaming.leases."""

import logging
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings

from . import ingestion, leases

logger = logging.getLogger(__name__)

# Set when this worker begins its shutdown (SIGTERM of a deploy, Ctrl-C): its ingestion
# loop stops at once, releases its leases and leaves, so the other processes take its pairs
# within a tick instead of when the leases lapse. The worker runs the threads pool
# (Procfile): the loop lives in the process that gets the signal.
worker_stopping = threading.Event()
_loop: threading.Thread | None = None


@worker_ready.connect
def _start_ingestion(**_kwargs) -> None:
    global _loop
    if not settings.INGESTION_IN_WORKERS:
        return
    worker_stopping.clear()
    _loop = threading.Thread(target=ingestion.run_loop, name="ingestion", daemon=True, kwargs={
        "owner": ingestion.new_owner_id("celery"), "stop": worker_stopping,
        "join_seconds": settings.INGESTION_JOIN_SECONDS})
    _loop.start()


@worker_shutting_down.connect
def _stop_ingestion(**_kwargs) -> None:
    worker_stopping.set()


@worker_shutdown.connect
def _wait_for_ingestion(**_kwargs) -> None:
    """The loop's last tick commits and its leases are released before the process exits."""
    worker_stopping.set()
    if _loop is not None:
        _loop.join(timeout=15)
        if _loop.is_alive():
            logger.warning("The ingestion loop did not stop within 15 s")


@shared_task(name="streaming.supervise_ingestion", ignore_result=True)
def supervise_ingestion() -> int:
    """Pairs whose grace period ended stop being wanted; returns how many wanted pairs no
    running process holds (the processes' loops take them within a tick)."""
    leases.retire_unwanted()
    return leases.pairs_without_a_worker()
