"""`python -m config.serve --processes N`: N daphne processes on one port, as production runs
on an N-core machine. Both processes answer on the one port, a process that dies is
replaced while the other keeps serving, and SIGTERM stops them all and frees the port."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.integration.servers import ROOT, embedded_site, free_port


def answering_pids(url: str, requests: int = 200) -> set[int]:
    """The pids of the processes that answered `requests` requests from 16 threads."""
    # no connection kept alive: each request opens its own, and the kernel picks the process
    with httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as http, \
            ThreadPoolExecutor(16) as pool:
        return set(pool.map(lambda _: http.get(f"{url}/api/v1/test/process").json()["pid"], range(requests)))


def exited(pid: int) -> bool:
    """Every thread of the process is gone or a zombie, so its sockets are closed. The main
    thread alone is not enough: it can be a zombie while another thread still exits holding
    the process's files, and the listening socket then takes connections and resets them."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    for thread in threads:
        try:
            state = Path(f"/proc/{pid}/task/{thread}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state not in ("Z", "X"):
            return False
    return True


def wait_for(check, seconds: float, what: str, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            found = check()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"{what} within {seconds} s; the server said:\n{log.read_text()[-3000:]}")


def test_two_daphne_processes_share_one_port_are_replaced_when_they_die_and_stop_on_sigterm(tmp_path):
    env, _ = embedded_site(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="serve-", suffix=".log")[1])
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "config.serve", "--port", str(port), "--processes", "2", "--grace", "5"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.integration.settings", "LOG_LEVEL": "WARNING",
                 "INGESTION_AUTOSTART": "false", **env})
    try:
        def both_answering():
            found = answering_pids(url)
            return found if len(found) == 2 else None

        pids = wait_for(both_answering, 60, "both processes answering on the one port", log)
        victim, survivor = sorted(pids)
        os.kill(victim, signal.SIGKILL)
        # A SIGKILL is delivered asynchronously: until the victim has exited, the kernel still
        # hands it new connections on the shared port, and resets them when it goes.
        wait_for(lambda: exited(victim), 10, "the killed process to exit", log)
        assert httpx.get(f"{url}/api/v1/test/process", timeout=10).status_code == 200  # the other still serves
        def victim_replaced():
            found = both_answering()
            return found if found and victim not in found else None

        replaced = wait_for(victim_replaced, 60, "a new process in place of the killed one", log)
        assert survivor in replaced

        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        for pid in replaced:  # every daphne process stopped with it
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"daphne process {pid} still running after SIGTERM")
        try:
            httpx.get(f"{url}/api/v1/test/process", timeout=2)
        except httpx.ConnectError:
            pass
        else:
            raise AssertionError("the port still answers after SIGTERM")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.unlink(missing_ok=True)
