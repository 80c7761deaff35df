"""The long-lived processes (daphne, the Celery worker that runs ingestion) keep what they
loaded at start out of the collector's scans and collect young objects less often
(config/collector.py; measured by bench/bench_collector.py)."""

import gc

import pytest

from config.collector import MIDDLE_THRESHOLD, OLD_THRESHOLD, YOUNG_THRESHOLD


@pytest.fixture
def collector_restored():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_a_ready_celery_worker_freezes_what_it_loaded_and_collects_young_objects_less_often(collector_restored):
    from celery.signals import worker_ready

    from config import celery

    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    assert celery._collect_less_often in [receiver() for _, receiver in worker_ready.receivers]
    celery._collect_less_often()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    assert gc.get_freeze_count() > 0
