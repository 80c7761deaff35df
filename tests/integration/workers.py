"""A real Celery worker (and its beat) for integration tests."""

from __future__ import annotations

import os
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
    if beat:
        args += ["--beat", "--schedule", tempfile.mktemp(prefix="beat-")]
    process = subprocess.Popen(args, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        os.unlink(log.name)
