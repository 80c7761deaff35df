"""Real server processes for integration tests and benchmarks."""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing, contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


class ServerUrl(str):
    """A server's base URL that also knows the server's process id."""

    pid: int = 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_for(settings_dict: dict) -> str:
    """The URL of the database Django is using now (the test database inside pytest)."""
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{host}:{port}/{settings_dict['NAME']}"


@contextmanager
def daphne_processes(count: int, *, env: dict[str, str], settings_module: str = "tests.integration.settings"):
    """Start `count` daphne processes; yields their base URLs; stops them after."""
    processes, urls, logs = [], [], []
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module, "LOG_LEVEL": "WARNING", **env}
    try:
        for _ in range(count):
            port = free_port()
            # A file, not a pipe: an unread pipe fills up and blocks the server.
            log = tempfile.NamedTemporaryFile(prefix=f"daphne-{port}-", suffix=".log", delete=False)
            logs.append(log)
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "daphne", "-e", f"tcp:port={port}:interface=127.0.0.1:backlog=1024",
                 "config.asgi:application"],
                cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT))
            url = ServerUrl(f"http://127.0.0.1:{port}")
            url.pid = processes[-1].pid
            urls.append(url)
        for url, process, log in zip(urls, processes, logs):
            wait_until_serving(url, process, log.name)
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()
            os.unlink(log.name)


def wait_until_serving(url: str, process: subprocess.Popen, log_path: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1) as http:  # one client: each new one loads the CA bundle, 20 ms of CPU
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {Path(log_path).read_text()[-2000:]}")
            try:
                http.get(f"{url}/healthz")  # any answer: the server is up (healthy or not)
                return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not start")


def eventually(read, expected, *, within: float = 1.0, every: float = 0.05):
    """Poll `read()` until it returns `expected`, failing once `within` seconds passed: a
    change made elsewhere (another process, the staff command) reaches a running server
    within the bound its caches allow (ACCOUNT_CACHE_SECONDS and the like, under a second)."""
    started = time.monotonic()
    while True:
        got = read()
        if got == expected:
            return
        assert time.monotonic() - started < within, f"still {got!r} {within} s after the change (want {expected!r})"
        time.sleep(every)


def manage(env: dict[str, str], *args: str) -> str:
    """Run `manage.py ARGS` in a process of its own against env's database; its stdout."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.integration.settings", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# Where prepared SQLite sites are kept for the rest of the run (tests/conftest.py sets it to
# a folder every pytest-xdist process of the run shares); None: every site is built anew.
SITE_TEMPLATES: Path | None = None


def sqlite_site(folder, *commands: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """An SQLite file `folder`/db.sqlite3 on which the staff commands ran in order, each in a
    process of its own; returns the environment to serve it with and each command's stdout.

    Building a site took 11 s of CPU (migrate, the seeded history, four commands), a third of
    the suite's. The first site of a run built with the same commands, within the same clock
    hour (the seeded history ends at the hour), is the template: the others are copies of its
    file, made by SQLite's backup (what the commands wrote, whatever the journal mode), with
    the same outputs. A template is built on the template of its commands but the last, so
    sites that share leading commands (the migration, the seeded demo) run them once a run.
    A test that changes the site changes its copy only."""
    target = Path(folder) / "db.sqlite3"
    env = {"DATABASE_URL": f"sqlite:///{target}", "REDIS_URL": ""}
    if SITE_TEMPLATES is None:
        return env, [manage(env, *command) for command in commands]
    template, outputs = _site_template(commands)
    _copy_sqlite(template, target)
    return env, outputs


def _site_template(commands: tuple[tuple[str, ...], ...]) -> tuple[Path, list[str]]:
    """The template file of `commands` and their outputs, built once a run and clock hour."""
    hour = int(time.time()) // 3600
    name = hashlib.sha256(repr((hour, commands)).encode()).hexdigest()[:16]
    SITE_TEMPLATES.mkdir(parents=True, exist_ok=True)
    template, outputs = SITE_TEMPLATES / f"{name}.sqlite3", SITE_TEMPLATES / f"{name}.out"
    with open(SITE_TEMPLATES / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process builds it; the others wait and copy
        if not outputs.exists():  # built aside and renamed: a failed build leaves no half-made template
            building = template.with_suffix(".building")
            building.unlink(missing_ok=True)
            printed = []
            if len(commands) > 1:
                base, printed = _site_template(commands[:-1])
                _copy_sqlite(base, building)
            printed.append(manage({"DATABASE_URL": f"sqlite:///{building}", "REDIS_URL": ""}, *commands[-1]))
            building.rename(template)
            outputs.write_text("\0".join(printed))
    return template, outputs.read_text().split("\0")


def _copy_sqlite(source_path: Path, target_path: Path) -> None:
    with closing(sqlite3.connect(source_path)) as source, closing(sqlite3.connect(target_path)) as copy:
        source.backup(copy)


def embedded_site(folder, email: str = "a@example.com", keys: int = 1) -> tuple[dict[str, str], list[str]]:
    """A `make run`-style embedded site (SQLite file, no Redis) built with the staff
    commands: migrated, the demo catalog seeded, a Pro plan and an account holding `keys`
    keys. Returns the environment to serve it with and the keys."""
    env, printed = sqlite_site(
        folder, ("migrate", "--noinput", "-v0"), ("seed_demo", "--base-url", "http://127.0.0.1", "--history-days", "1"),
        ("plan", "pro", "--features", "api,streaming", "--monthly-requests", "100000", "--monthly-bytes", "1000000000",
         "--pair-price-usd", "10"),
        ("account", email, "--plan", "pro"),
        *(("apikey", email, "--name", f"key {n}") for n in range(1, keys + 1)))
    return env, [output.splitlines()[-1] for output in printed[4:]]


def loop_connections() -> int:
    """PostgreSQL connections the running servers' event loops hold to the test database
    (config.db's pool, told apart by its application_name): how a test sees that answers
    came from the loop."""
    from django.db import connection

    from config.db import LOOP_APPLICATION_NAME

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND application_name = %s", [LOOP_APPLICATION_NAME])
        return cursor.fetchone()[0]


def process_tree(root: int) -> set[int]:
    """root and every live descendant (from /proc: a child that made a session of its own
    is outside its parent's process group, and killpg misses it)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(entry))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


def kill_tree(root: int) -> None:
    """SIGKILL root and every descendant."""
    for pid in process_tree(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
