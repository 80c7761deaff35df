"""`make run-full` starts the whole full mode with one command, as a user would run it:
the web process, the Celery workers (one per core, each an ingestion loop) and beat (honcho,
Procfile) against PostgreSQL and Redis with the seeded demo; live bars ingested by the
workers reach the API; Ctrl-C stops them all."""

import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.integration.servers import ROOT, database_url_for, free_port, kill_tree

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]
DEMO_KEY = re.compile(r"Demo key: (mdp_live_\S+)")


def wait_for(check, seconds: float, what: str, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{what} within {seconds} s; make run-full said:\n{log.read_text()[-3000:]}")


def test_make_run_full_serves_the_demo_with_a_worker_and_beat_and_stops_on_ctrl_c():
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}  # the user's shell
    env.update(DATABASE_URL=database_url_for(connection.settings_dict), REDIS_URL=settings.REDIS_URL)
    log = Path(tempfile.mkstemp(prefix="run-full-", suffix=".log")[1])
    with log.open("w") as out:
        process = subprocess.Popen(["make", "run-full", f"PORT={port}"], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        key = wait_for(lambda: (m := DEMO_KEY.search(log.read_text())) and m.group(1), 120, "no demo key", log)
        url = f"http://127.0.0.1:{port}"

        def live_bar():
            try:
                response = httpx.get(f"{url}/api/v1/streams/binance/BTC/USDT/live",
                                     headers={"Authorization": f"Bearer {key}"}, timeout=5)
            except httpx.HTTPError:
                return None
            return response.status_code == 200 and response.json() and response.json()["ts_ms"]

        first = wait_for(live_bar, 120, "no live bar", log)
        later = wait_for(lambda: (ts := live_bar()) and ts > first and ts, 30, "live bars stopped", log)
        assert later > first  # the worker keeps ingesting: bars move

        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole foreground group
        process.wait(timeout=30)
        text = log.read_text()
        for name in ("web.1", "worker.1", "beat.1"):
            assert re.search(rf"{name} stopped", text), text[-2000:]
    finally:
        if process.poll() is None:  # a failure before Ctrl-C: honcho's children too, whatever their group
            kill_tree(process.pid)
        log.unlink(missing_ok=True)
