"""How the long-lived processes (daphne, the Celery worker that runs ingestion) use Python's
cyclic garbage collector: everything loaded at start lives as long as the process, so it is
kept out of the collector's scans (`gc.freeze`), and young objects are collected less often.

Both processes allocate heavily and free almost everything by reference counting: fanning a
bar out to thousands of streams (the p99 of SSE delivery was full collections,
bench/bench_sse.py), and ingestion's books, bars and detectors (at Python's default
thresholds 8 % of ingestion's CPU at 50 busy pairs went to collections, 2 % with these;
docs/DECISIONS.md)."""

import gc
import logging
import time

logger = logging.getLogger(__name__)

YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD = 50_000, 50, 100
LONG_PAUSE_S = 0.1  # a collection this long stalls every request or pair of the process: logged


def collect_less_often(*, log_long_pauses: bool = True) -> None:
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    if log_long_pauses and _log_long_pauses not in gc.callbacks:
        gc.callbacks.append(_log_long_pauses)


_started = _started_cpu = 0.0


def _log_long_pauses(phase: str, info: dict) -> None:
    """Logs the wall time and the collecting thread's CPU time: a pause far longer than its
    CPU is the process waiting for a core, not the collector working."""
    global _started, _started_cpu
    if phase == "start":
        _started, _started_cpu = time.perf_counter(), time.thread_time()
    elif (took := time.perf_counter() - _started) >= LONG_PAUSE_S:
        logger.warning("garbage collection of generation %d took %.0f ms (%.0f ms of CPU; %d objects collected)",
                       info["generation"], took * 1000, (time.thread_time() - _started_cpu) * 1000,
                       info["collected"])
