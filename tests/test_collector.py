"""The long-lived processes (daphne, the Celery worker that runs ingestion) keep what they
loaded at start out of the collector's scans and collect young objects less often
(config/collector.py; measured by bench/bench_collector.py)."""

import gc

import pytest

from config.collector import MIDDLE_THRESHOLD, OLD_THRESHOLD, YOUNG_THRESHOLD


@pytest.fixture
def collector_restored():
    threshold = gc.get_threshold()
    callbacks = list(gc.callbacks)
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.callbacks[:] = callbacks


def test_a_ready_celery_worker_freezes_what_it_loaded_and_collects_young_objects_less_often(collector_restored):
    from celery.signals import worker_ready

    from config import celery

    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    assert celery._collect_less_often in [receiver() for _, receiver in worker_ready.receivers]
    celery._collect_less_often()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    assert gc.get_freeze_count() > 0


def test_a_collection_that_pauses_the_process_for_long_is_logged_with_its_generation(collector_restored, caplog):
    from config import collector

    collector.collect_less_often()
    collector.collect_less_often()
    assert gc.callbacks.count(collector._log_long_pauses) == 1
    with caplog.at_level("WARNING", logger="config.collector"):
        gc.collect(0)  # a short one says nothing
        assert not caplog.records
        collector.LONG_PAUSE_S, long_pause = 0.0, collector.LONG_PAUSE_S  # every one is long
        try:
            gc.collect(2)
        finally:
            collector.LONG_PAUSE_S = long_pause
    assert any("garbage collection of generation 2 took" in record.getMessage() for record in caplog.records)
