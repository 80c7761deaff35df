"""A real Celery worker (and its beat) for integration tests."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager

from .servers import ROOT


def supervise_now(broker_url: str) -> None:
    """Ask for the ingestion supervisor at once instead of waiting up to 10 s for beat."""
    from celery import Celery

    app = Celery(broker=broker_url)
    try:
        app.send_task("streaming.supervise_ingestion")
    finally:
        app.close()


def assert_second_bars_are_the_simulators(pair, start: int, end: int, context: str) -> list[tuple]:
    """The stored second bars of [start, end): one a second, none twice, each exactly what
    one uninterrupted BarBuilder pass over the simulator builds. Returns the rows."""
    from collections import Counter

    from market.bars import BAR_FIELDS
    from market.sources.bar_builder import BarBuilder
    from streaming.sources import pair_ref, source_for

    from tests.second_bars import stored_seconds

    rows = stored_seconds(pair, start, end, BAR_FIELDS)
    timestamps = [row[0] for row in rows]
    duplicated = [ts for ts, n in Counter(timestamps).items() if n > 1]
    missing = sorted(set(range(start, end, 1000)) - set(timestamps))
    assert not duplicated and not missing, f"{context}: duplicated {duplicated[:5]} missing {missing[:5]}"
    source, ref = source_for(pair), pair_ref(pair)
    builder = BarBuilder(ref)
    for event in source.events(ref, start, end):
        builder.feed(event)
    expected = [tuple(getattr(bar, name) for name in BAR_FIELDS) for bar in builder.flush(end)]
    assert len(expected) == len(rows), context
    different = [(got[0], [name for name, a, b in zip(BAR_FIELDS, got, want) if a != b])
                 for got, want in zip(rows, expected) if got != want]
    assert not different, f"{context}: {len(different)} bars differ from the simulator's, first {different[:3]}"
    return rows


@contextmanager
def celery_worker(*, env: dict[str, str], beat: bool = True, concurrency: int = 8):
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.integration.settings", "LOG_LEVEL": "WARNING", **env}
    log = tempfile.NamedTemporaryFile(prefix="celery-", suffix=".log", delete=False)
    args = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "threads",
            "--concurrency", str(concurrency), "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
    schedule = tempfile.mktemp(prefix="beat-")
    if beat:
        args += ["--beat", "--schedule", schedule]
    # A session of its own: the embedded beat is a child process, which outlives a worker that
    # is killed (by a test or after the timeout below) unless the whole group is ended.
    process = subprocess.Popen(args, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        try:
            os.killpg(process.pid, signal.SIGKILL)  # what is left of the group (the beat)
        except ProcessLookupError:
            pass
        log.close()
        os.unlink(log.name)
        for path in glob.glob(glob.escape(schedule) + "*"):  # beat's schedule (shelve files)
            os.unlink(path)
