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
