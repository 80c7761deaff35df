"""Private, disposable Redis and PostgreSQL servers for fault-injection tests.

The machine's shared Redis (6379) and PostgreSQL (5432) serve other test runs at the same
time, so a test that stops or restarts a dependency gets its own server on a free port in a
temporary directory, and stops, starts or restarts only that one."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .servers import free_port

PG_BIN = Path("/usr/local/bin")


def wait_for(predicate, *, timeout: float, interval: float = 0.1, message: str = "condition"):
    """Poll predicate() until it returns something truthy; that value, or TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def kill9(process: subprocess.Popen, timeout: float = 10) -> None:
    """SIGKILL, as an out-of-memory killer or a pulled plug would, and reap the process."""
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=timeout)


class PrivateRedis:
    """A redis-server of our own: no persistence, so a restart loses every key."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None
        self._log = open(directory / "redis.log", "ab")

    def start(self, timeout: float = 10) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir)], stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(self.ping, timeout=timeout, message=f"redis-server on port {self.port}")

    def stop(self, timeout: float = 10) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=timeout)

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def close(self) -> None:
        try:
            self.stop()
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


@contextmanager
def private_redis():
    directory = Path(tempfile.mkdtemp(prefix="faults-redis-"))
    server = PrivateRedis(directory)
    try:
        server.start()
        yield server
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)


class PrivatePostgres:
    """A PostgreSQL cluster of our own (initdb in a temporary directory), run by pg_ctl.
    Durability is switched off: it only lives for one test."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.port = free_port()
        self.url_base = f"postgres://postgres@127.0.0.1:{self.port}"
        self._user = None if os.geteuid() != 0 else "postgres"  # initdb refuses to run as root

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        command = [str(PG_BIN / args[0]), *args[1:]]
        if self._user:
            command = ["runuser", "-u", self._user, "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)

    def init(self) -> None:
        if self._user:
            record = pwd.getpwnam(self._user)
            os.chown(self.dir, record.pw_uid, record.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")

    def _ctl(self, action: str, *extra: str) -> None:
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._run("pg_ctl", action, "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30", "-o", options,
                  *extra)

    def start(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        self._ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def running(self) -> bool:
        try:
            self._run("pg_ctl", "status", "-D", str(self.data), timeout=10)
            return True
        except subprocess.CalledProcessError:
            return False

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"{self.url_base}/postgres", autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return f"{self.url_base}/{name}"

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log.read_text()[-size:]
        except OSError:
            return ""


@contextmanager
def private_postgres():
    if not (PG_BIN / "initdb").exists():
        import pytest

        pytest.skip(f"needs PostgreSQL's server binaries in {PG_BIN}")
    directory = Path(tempfile.mkdtemp(prefix="faults-pg-"))
    server = PrivatePostgres(directory)
    try:
        server.init()
        server.start()
        yield server
    finally:
        if server.data.exists() and server.running():
            try:
                server.stop()
            except subprocess.SubprocessError:
                pass
        shutil.rmtree(directory, ignore_errors=True)


# -- talking to the service ---------------------------------------------------------------------

def sse_events(response, *, kind: str, want: int, timeout: float) -> list[tuple[str, str | None, str | None]]:
    """(event, id, data) blocks from an open text/event-stream response until `want` events
    of `kind` arrived or the deadline passed (keep-alives and other events are collected)."""
    out, block, deadline = [], {}, time.monotonic() + timeout
    for line in response.iter_lines():
        if not line:
            if block:
                out.append((block.get("event", "message"), block.get("id"), block.get("data")))
                block = {}
            if sum(1 for event in out if event[0] == kind) >= want or time.monotonic() > deadline:
                break
            continue
        if not line.startswith(":"):
            field, _, value = line.partition(": ")
            block[field] = value
        if time.monotonic() > deadline:
            break
    return out


def error_code(response) -> str | None:
    """The envelope's code of a JSON error response (None when the body is no envelope)."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or set(body) != {"error"}:
        return None
    error = body["error"]
    if not {"code", "message", "details", "request_id"} <= set(error) or not isinstance(error["details"], dict):
        return None
    return error["code"]


def seed_hour_history(pair, *, days: int, now_ms: int) -> None:
    """Hourly (and so daily) simulated bars for the last `days` days of one pair."""
    from market.bars import floor_ms
    from market.services import bars_write
    from streaming.sources import pair_ref, source_for

    end = floor_ms(now_ms, "hour")
    bars = source_for(pair).synthesize_bars(pair_ref(pair), end - days * 86_400_000, end, "hour")
    bars_write(pair=pair, granularity="hour", bars=bars)
