"""How many busy live pairs the full mode carries: the service run as `make run-full` runs
it, fed by a local exchange replaying the recorded Binance frames under N symbols, driven
only from outside, as a customer and staff drive it.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_REDIS_URL=redis://127.0.0.1:6379/0 \\
        BENCH_SCALE_PAIRS=10,25,50,100,200 BENCH_SCALE_SECONDS=300 .venv/bin/python bench/bench_scale.py

For each N of BENCH_SCALE_PAIRS, in order, until one breaks (bar lag p99 over 2 s):

1. A fresh database (CREATE DATABASE through BENCH_DATABASE_URL, dropped after) and the
   Redis database of BENCH_REDIS_URL, which must be the benchmark's own: its Celery queue is
   purged before each run (a run's fresh database reuses the pair ids of the last one, so a
   task the last run left would act on the new pairs); the cache gets a prefix of the run's own.
2. The load generator, a process of its own: `python -m tests.venues.server --symbols N`
   (LoopingBinanceExchange: S001USDT.. replaying BTCUSDT / ETHUSDT at spread phases,
   looped). Its CPU is reported apart.
3. Staff commands, each in its own process: migrate; the binance exchange made a live
   source (as `seed_demo --live binance` does, without the demo); `catalog_sync --exchange
   binance --quote USDT` (the pairs and their tick and step, from the exchange's
   exchangeInfo); `plan`, `account`, `apikey`.
4. `honcho start -f Procfile -c worker=<cores>` with HOST, PORT, BACKLOG and WEB_PROCESSES
   (BENCH_SCALE_WEB_PROCESSES, 2 like the Makefile; BENCH_SCALE_INGEST_PROCESSES, the cores, like its
   INGEST_PROCESSES) as `make run-full` sets them, DATABASE_URL and REDIS_URL of the run, and
   BINANCE_WS_URL / BINANCE_REST_URL pointing at the exchange. Whatever the Procfile starts runs.
5. The customer subscribes the N pairs (POST /api/v1/streams) and a client process opens one
   SSE stream per pair (GET .../events, resuming with Last-Event-ID if a stream drops).
6. Once every pair is live and BENCH_SCALE_SETTLE_SECONDS (15) passed, the measured window
   of BENCH_SCALE_SECONDS (300) starts.

Figures per N (the window's):
* time to live: subscribe until the pair's /status shows a heartbeat (WARMING or READY) and
  its feed `live`, polled every second. READY itself needs 95 % of the last 24 hours
  covered (docs/STREAMING.md), which a live-only pair reaches after a day, so it is counted,
  not awaited.
* bar lag: when a second bar became visible in PostgreSQL minus the end of its second. The
  pairs' newest stored second is read every 200 ms (one statement, the ORM's own query of
  the second-bar model); every second up to it is taken as visible at the start of the
  statement that first saw it (a committed row is visible to a statement started after
  the commit), so that bound is at most 200 ms (plus the statement's queueing) above the
  commit. A bar is pushed on SSE only once committed, so its receipt by the SSE client is
  another upper bound: the lag uses the earlier of the two (the SSE receipt when the live
  path is quick, the poll when it is not). A bar still not visible when the poll ends
  counts with the lag it had then (a lower bound), so falling behind cannot hide. (Exact
  commit times would need track_commit_timestamp, a server restart.) Also reported: the p99
  of the seconds :00-:02 of each minute, when minutes close and are packed;
  BENCH_SCALE_DUMP=<file> appends every pair's lag per second to the file (a stall shows as
  one second late on every pair of one process).
* missing or doubled: the pairs' stored seconds over the window, read back through the API
  snapshot: a second twice, or absent between the pair's first and last stored second and
  outside the gaps its /status reports; a bar delivered twice on one SSE stream.
* SSE delivery: receive time minus the end of the bar's second, and minus the time the poll
  first saw it in the database.
* CPU from /proc (utime + stime of each process, sampled every second): the ingestion
  processes (every process honcho started but web and beat, with their children) per
  exchange message sent in the window (GET /stats of the exchange); the web processes;
  PostgreSQL, both its backends on the run's database and every postgres process of the
  server (the machine's PostgreSQL is shared: the second includes other users'); the WAL the
  server wrote (pg_current_wal_lsn, server-wide too) per pair-hour; the load generator (the
  exchange, and the SSE client process) apart.

Everything started runs in a process group of its own and is ended (SIGINT like Ctrl-C, then
SIGKILL) on the way out, also after a failure or Ctrl-C; the database is dropped.

`python bench/bench_scale.py sse-client ...` is the SSE client process (internal)."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.integration.servers import process_tree  # noqa: E402 (the project root on the path first)

LAG_GOAL_MS = 2000
# config/collector.py's warning, in honcho's output (`<process>.<n> | ...`): process, generation, ms
LONG_PAUSE = re.compile(
    r"^[\d:]* ?(\w+)\.\d+ .*garbage collection of generation (\d) took (\d+) ms \((\d+) ms of CPU", re.M)
HEADLINE_GOAL_PAIRS = 100
POLL_SECONDS = 0.2
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- processes ----------------------------------------------------------------------------------

class Group:
    """A process started in a session (process group) of its own, logging to a file; stop()
    ends the whole group: SIGINT (Ctrl-C), then SIGTERM, then SIGKILL."""

    def __init__(self, name: str, args: list[str], env: dict, *, stdout=None):
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"bench-scale-{name}-", suffix=".log")[1])
        with self.log.open("w") as out:
            self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=stdout or out,
                                            stderr=out, start_new_session=True)
        self.pid = self.process.pid

    def stop(self, grace: float = 20.0) -> None:
        for signum, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pid, signum)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            try:  # the leader is gone; what is left of its group goes too
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def cpu_ticks(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[11]) + int(fields[12])  # utime + stime


def processes_named(name: str) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    found.add(int(entry))
            except OSError:
                pass
    return found


def machine_ticks() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


class CpuMeter:
    """CPU seconds of groups of processes over a window: each group's processes (a function
    of no argument giving their pids) are read every `sample()`; a process counts from the
    first reading that saw it in the window to its last."""

    def __init__(self, groups: dict):
        self.groups = groups
        self.first: dict[str, dict[int, int]] = {name: {} for name in groups}
        self.last: dict[str, dict[int, int]] = {name: {} for name in groups}
        self.started = self.ended = 0.0
        self.machine = (machine_ticks(), machine_ticks())

    def start(self) -> None:
        self.started = time.monotonic()
        self.machine = (machine_ticks(), self.machine[1])
        self.sample()

    def sample(self) -> None:
        for name, pids in self.groups.items():
            for pid in pids():
                ticks = cpu_ticks(pid)
                if ticks is not None:
                    self.first[name].setdefault(pid, ticks)
                    self.last[name][pid] = ticks

    def stop(self) -> None:
        self.sample()
        self.ended = time.monotonic()
        self.machine = (self.machine[0], machine_ticks())

    def seconds(self, name: str) -> float:
        return sum(self.last[name][pid] - self.first[name][pid] for pid in self.last[name]) / CLK_TCK

    def cores(self, name: str) -> float:
        return self.seconds(name) / max(self.ended - self.started, 1e-9)

    def machine_cores(self) -> float:
        (busy0, total0), (busy1, total1) = self.machine
        return (busy1 - busy0) / max(total1 - total0, 1) * os.cpu_count()


# -- the run -----------------------------------------------------------------------------------

@dataclass
class ScaleResult:
    pairs: int
    seconds: float
    live_s: list[float] = field(default_factory=list)
    never_live: int = 0
    ready: int = 0
    lag_ms: list[float] = field(default_factory=list)
    lag_at_minute_start_ms: list[float] = field(default_factory=list)  # seconds :00-:02, when minutes close and pack
    bars: int = 0
    missing: int = 0
    doubled_stored: int = 0
    doubled_sse: int = 0
    sse_after_second_ms: list[float] = field(default_factory=list)
    sse_after_database_ms: list[float] = field(default_factory=list)
    sse_reconnects: int = 0
    messages: int = 0
    cpu: dict = field(default_factory=dict)  # CPU seconds in the window, per group of processes
    cpu_cores: dict = field(default_factory=dict)  # the same as cores busy on average
    machine_cores: float = 0.0
    wal_bytes: int = 0
    database_growth_bytes: int = 0
    resyncs: int = 0
    disconnects: int = 0
    trades_missed: int = 0
    exchange_behind_ms: float = 0.0
    late_seconds: dict = field(default_factory=dict)  # second -> pairs whose bar came later than the goal
    collector_pauses: list[tuple[str, int, float, float]] = field(default_factory=list)  # (process, generation, ms, CPU ms)
    error: str = ""
    process_groups: list[int] = field(default_factory=list)  # the groups started (all ended on return)

    @property
    def held(self) -> bool:
        return (not self.error and not self.never_live and bool(self.lag_ms)
                and percentile(self.lag_ms, 99) <= LAG_GOAL_MS and not self.missing
                and not self.doubled_stored and not self.doubled_sse)

    def per_message_us(self, group: str) -> float:
        return self.cpu.get(group, 0.0) / self.messages * 1e6 if self.messages else float("nan")

    def per_pair_hour(self, amount: float) -> float:
        return amount / (self.pairs * self.seconds / 3600)


def percentile(values, pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))]


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run([str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args[:2])} failed: {done.stderr[-2000:]}")
    return done.stdout.strip()


LIVE_SOURCE = """
from market.models import Exchange
Exchange.objects.update_or_create(slug="binance", defaults={
    "name": "Binance", "source": Exchange.Source.EXCHANGE, "ccxt_id": "binance", "replay_loop_from_ms": None})
"""

# The pairs' ids and the statement that reads their newest stored second, from the models
# of the code under test (whatever table or partitioning they use).
POLL_STATEMENT = """
import json
from django.db.models import Max
from market.models import Pair, SecondBar
pairs = {p.base.symbol: p.pk for p in Pair.objects.filter(exchange__slug="binance", quote__symbol="USDT")
         .select_related("base")}
query = (SecondBar.objects.filter(pair_id__in=sorted(pairs.values())).values("pair_id")
         .annotate(latest=Max("ts_ms")).values_list("pair_id", "latest"))
sql, params = query.query.sql_with_params()
print(json.dumps({"pairs": pairs, "sql": sql, "params": list(params)}))
"""


class NewestSecondPoll:
    """Every POLL_SECONDS: each pair's newest stored second; records when each second was
    first seen (the start of the statement that saw it)."""

    def __init__(self, database_url: str, sql: str, params: list, pair_of_id: dict[int, str]):
        import psycopg

        self.conn = psycopg.connect(database_url, autocommit=True)
        self.backend_pid = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.sql, self.params, self.pair_of_id = sql, params, pair_of_id
        self.latest: dict[str, int] = {}
        self.seen: dict[str, dict[int, float]] = {name: {} for name in pair_of_id.values()}
        self.stopped = threading.Event()
        self.last_poll_ms = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True, name="newest-second-poll")

    def start(self):
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopped.is_set():
            began = time.time() * 1000
            rows = self.conn.execute(self.sql, self.params).fetchall()
            for pair_id, latest in rows:
                name = self.pair_of_id[pair_id]
                before = self.latest.get(name)
                if before is not None and latest > before:
                    seen = self.seen[name]
                    for second in range(before + 1000, latest + 1000, 1000):
                        seen.setdefault(second, began)
                if before is None or latest > before:
                    self.latest[name] = latest
            self.last_poll_ms = began
            self.stopped.wait(max(0.0, POLL_SECONDS - (time.time() * 1000 - began) / 1000))

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        self.conn.close()


def _http(base: str, key: str | None = None):
    import httpx

    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=60)


def _wait_serving(url: str, honcho: Group, timeout: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if honcho.process.poll() is not None:
            raise RuntimeError(f"honcho exited: {honcho.tail()}")
        try:
            httpx.get(f"{url}/healthz", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise RuntimeError(f"the web process did not answer within {timeout} s: {honcho.tail()}")


def _procfile_entries() -> dict[str, list[str]]:
    """Procfile name -> the words of its command before the first variable."""
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.startswith("#"):
            words = command.split()
            cut = next((i for i, word in enumerate(words) if "$" in word), len(words))
            entries[name.strip()] = words[:cut]
    return entries


def _honcho_pids(honcho: Group) -> dict[str, list[int]]:
    """The processes honcho started, by Procfile name: each of honcho's descendants that
    runs an entry's command (`sh -c <command>` and what it starts) goes to the entry it
    matches best (the most words); their trees are taken whole."""
    entries = _procfile_entries()
    started: dict[str, list[int]] = {}
    for pid in process_tree(honcho.pid) - {honcho.pid}:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        score = {name: len(words) for name, words in entries.items() if words and " ".join(words) in cmdline}
        if score:
            started.setdefault(max(score, key=score.get), []).append(pid)
    return started


def _statuses(client, names: list[str], threads: int = 8) -> dict[str, dict]:
    from concurrent.futures import ThreadPoolExecutor

    def one(name):
        try:
            return name, client.get(f"/api/v1/streams/binance/{name}/USDT/status").json()
        except Exception as exc:  # noqa: BLE001 - a status that fails to answer is reported as such
            return name, {"error": str(exc)}

    with ThreadPoolExecutor(threads) as pool:
        return dict(pool.map(one, names))


def _is_live(status: dict) -> bool:
    source = status.get("signals", {}).get("source", {})
    return status.get("state") in ("WARMING", "READY") and source.get("state") == "live"


def measure(pairs: int, seconds: float, *, admin_url: str, redis_url: str, settle_s: float | None = None,
            web_processes: str | None = None, log=print) -> ScaleResult:
    """One run at `pairs` pairs, measured over `seconds` (see the module docstring)."""
    from bench_metering import _database
    from tests.integration.servers import free_port

    settle_s = float(os.environ.get("BENCH_SCALE_SETTLE_SECONDS", 15)) if settle_s is None else settle_s
    web_processes = web_processes or os.environ.get("BENCH_SCALE_WEB_PROCESSES", "2")
    result = ScaleResult(pairs, seconds)
    with ExitStack() as stack:
        database_url, drop = _database(admin_url)
        stack.callback(drop)
        base_env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL",
                                                                    "REDIS_URL", "CELERY_BROKER_URL")}
        exchange = Group("exchange", [str(BIN / "python"), "-m", "tests.venues.server", "--symbols", str(pairs),
                                      "--port", str(free_port())], base_env, stdout=subprocess.PIPE)
        stack.callback(exchange.stop)
        result.process_groups.append(exchange.pid)
        venue = json.loads(exchange.process.stdout.readline() or "{}")
        if not venue:
            raise RuntimeError(f"the exchange did not start: {exchange.tail()}")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**base_env, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
               "CACHE_KEY_PREFIX": f"bench-scale-{uuid.uuid4().hex[:8]}",
               "BINANCE_WS_URL": venue["ws_url"], "BINANCE_REST_URL": venue["rest_url"],
               # the local exchange limits no weight: every pair syncs at once (Binance would take
               # 100 pairs' snapshots over 10 minutes at the default budget)
               "BINANCE_REST_WEIGHT_PER_MINUTE": "0",
               "HOST": "127.0.0.1", "PORT": str(port), "BACKLOG": "1024", "WEB_PROCESSES": web_processes}
        log(f"  N={pairs}: exchange at {venue['rest_url']} (pass {venue['period_s']:.0f} s); staff setup")
        _manage(env, "migrate", "--noinput", "-v0")
        _manage(env, "shell", "-c", LIVE_SOURCE)
        log("  " + _manage(env, "catalog_sync", "--exchange", "binance", "--quote", "USDT"))
        _manage(env, "plan", "scale", "--features", "api,streaming", "--monthly-requests", str(10**12),
                "--monthly-bytes", str(10**15))
        _manage(env, "account", "scale@example.com", "--plan", "scale")
        key = _manage(env, "apikey", "scale@example.com", "--name", "scale benchmark").splitlines()[-1]
        poll_setup = json.loads(_manage(env, "shell", "-c", POLL_STATEMENT).splitlines()[-1])
        names = [name[:-4] for name in venue["symbols"]]
        assert sorted(poll_setup["pairs"]) == sorted(names), "catalog_sync did not list the exchange's symbols"
        subprocess.run([str(BIN / "celery"), "-A", "config", "purge", "-f"], cwd=ROOT, env=env, capture_output=True,
                       timeout=120)  # tasks a previous run left on this Redis

        # as the Makefile's run-full: one worker process (an ingestion loop) per core
        ingest_processes = os.environ.get("BENCH_SCALE_INGEST_PROCESSES") or str(os.cpu_count() or 2)
        honcho = Group("honcho", [str(BIN / "honcho"), "start", "-f", "Procfile", "-c", f"worker={ingest_processes}"],
                       env)
        stack.callback(honcho.stop)
        result.process_groups.append(honcho.pid)
        _wait_serving(url, honcho)
        client = stack.enter_context(_http(url, key))
        subscribed = {}
        for name in names:
            response = client.post("/api/v1/streams", json={"exchange": "binance", "base": name, "quote": "USDT"})
            if response.status_code not in (200, 201):
                raise RuntimeError(f"subscribing {name}: {response.status_code} {response.text[:300]}")
            subscribed[name] = time.monotonic()
        sse_out = Path(tempfile.mkstemp(prefix="bench-scale-sse-", suffix=".txt")[1])
        stack.callback(sse_out.unlink, missing_ok=True)
        sse = Group("sse", [str(BIN / "python"), str(Path(__file__)), "sse-client", url, key, str(sse_out), *names],
                    base_env)
        stack.callback(sse.stop)
        result.process_groups.append(sse.pid)
        log(f"  N={pairs}: {pairs} pairs subscribed, {pairs} SSE streams opening; waiting for them to be live")

        live_at: dict[str, float] = {}
        deadline = time.monotonic() + 60 + pairs * 0.5
        while len(live_at) < pairs and time.monotonic() < deadline:
            for name, status in _statuses(client, [n for n in names if n not in live_at]).items():
                if _is_live(status):
                    live_at[name] = time.monotonic()
            if honcho.process.poll() is not None:
                raise RuntimeError(f"honcho exited: {honcho.tail()}")
            time.sleep(1.0)
        result.live_s = [live_at[name] - subscribed[name] for name in live_at]
        result.never_live = pairs - len(live_at)
        if result.never_live:
            result.error = (f"{result.never_live} of {pairs} pairs not live within the wait "
                            f"(logs kept: {honcho.log}, {exchange.log})")
            return result
        time.sleep(settle_s)

        import psycopg

        pair_of_id = {pk: name for name, pk in poll_setup["pairs"].items()}
        poll = NewestSecondPoll(database_url, poll_setup["sql"], poll_setup["params"], pair_of_id).start()
        stack.callback(poll.stop)
        honcho_pids = _honcho_pids(honcho)

        def trees(kinds):
            def pids():
                found = set()
                for name, roots in honcho_pids.items():
                    if kinds(name):
                        for root in roots:
                            found |= process_tree(root)
                return found
            return pids

        admin = stack.enter_context(psycopg.connect(database_url, autocommit=True))
        own_backend = {poll.backend_pid, admin.execute("SELECT pg_backend_pid()").fetchone()[0]}

        def bench_backends():
            rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()").fetchall()
            return {pid for (pid,) in rows} - own_backend

        meter = CpuMeter({
            "ingestion": trees(lambda name: name not in ("web", "beat")),
            "web": trees(lambda name: name == "web"),
            "beat": trees(lambda name: name == "beat"),
            "postgres (run's database)": bench_backends,
            "postgres (server)": lambda: processes_named("postgres"),
            "redis (server)": lambda: processes_named("redis-server"),
            "exchange": lambda: process_tree(exchange.pid),
            "sse clients": lambda: process_tree(sse.pid),
        })
        time.sleep(1.0)  # the poll knows every pair's newest second
        venue_stats = _http(venue["rest_url"])
        stack.callback(venue_stats.close)
        window_start = time.time() * 1000
        before = venue_stats.get("/stats", params={"reset": "1"}).json()
        wal_before, size_before = admin.execute(
            "SELECT pg_current_wal_lsn(), pg_database_size(current_database())").fetchone()
        meter.start()
        log(f"  N={pairs}: all live (median {statistics.median(result.live_s):.1f} s); measuring {seconds:.0f} s")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            meter.sample()
            if honcho.process.poll() is not None:
                raise RuntimeError(f"honcho exited: {honcho.tail()}")
        meter.stop()
        window_end = time.time() * 1000
        after = venue_stats.get("/stats").json()
        wal, size_after = admin.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s), "
                                        "pg_database_size(current_database())", [wal_before]).fetchone()
        statuses = _statuses(client, names)
        time.sleep(3.0)  # the window's last seconds reach the store, the poll and the streams
        poll.stop()
        poll_end = poll.last_poll_ms
        sse.stop()

        result.messages = after["messages"] - before["messages"]
        result.exchange_behind_ms = after["behind_ms_max"]
        result.wal_bytes = int(wal)
        result.database_growth_bytes = size_after - size_before
        result.cpu = {name: meter.seconds(name) for name in meter.groups}
        result.cpu_cores = {name: meter.cores(name) for name in meter.groups}
        result.machine_cores = meter.machine_cores()
        result.ready = sum(1 for status in statuses.values() if status.get("state") == "READY")
        for status in statuses.values():
            source = status.get("signals", {}).get("source", {})
            result.resyncs += source.get("resyncs", 0)
            result.disconnects += source.get("disconnects", 0)
            result.trades_missed += source.get("trades_missed", 0)

        first_second = int(window_start // 1000 + 1) * 1000
        last_end = int(window_end // 1000) * 1000  # seconds [first_second, last_end) ended in the window
        sse_bars = _read_sse(sse_out)
        result.sse_reconnects = sse_bars.pop("__reconnects__", 0)
        dump = stack.enter_context(open(os.environ["BENCH_SCALE_DUMP"], "a")) if os.environ.get("BENCH_SCALE_DUMP") else None
        for name in names:
            seen = poll.seen[name]
            received_at: dict[int, float] = {}
            for ts, at in sse_bars.get(name, []):
                received_at[ts] = min(at, received_at.get(ts, at))
            for second in range(first_second, last_end, 1000):
                # a bar is pushed on SSE once committed: its receipt bounds the commit too
                bounds = [t for t in (seen.get(second), received_at.get(second)) if t is not None]
                result.lag_ms.append(min(bounds, default=poll_end) - (second + 1000))
                if result.lag_ms[-1] > LAG_GOAL_MS:
                    result.late_seconds[second] = result.late_seconds.get(second, 0) + 1
                if second % 60_000 < 3_000:
                    result.lag_at_minute_start_ms.append(result.lag_ms[-1])
                if dump is not None:
                    dump.write(f"{name} {second} {result.lag_ms[-1]:.0f}\n")
            stored = client.post(f"/api/v1/streams/binance/{name}/USDT/snapshot", json={
                "metrics": ["trade"], "granularity": "second", "from_ms": first_second,
                "to_ms": last_end}).json()
            stamps = [bar["ts_ms"] for bar in stored.get("bars", []) if first_second <= bar["ts_ms"] < last_end]
            result.bars += len(stamps)
            result.doubled_stored += len(stamps) - len(set(stamps))
            gaps = statuses[name].get("signals", {}).get("gaps") or []
            if stamps:
                present = set(stamps)
                result.missing += sum(1 for second in range(min(present), max(present), 1000)
                                      if second not in present and not any(a <= second < b for a, b in gaps))
            else:
                result.missing += (last_end - first_second) // 1000
            received = [(ts, at) for ts, at in sse_bars.get(name, []) if first_second <= ts < last_end]
            stamps_sse = [ts for ts, _ in received]
            result.doubled_sse += len(stamps_sse) - len(set(stamps_sse))
            for ts, at in received:
                result.sse_after_second_ms.append(at - (ts + 1000))
                if ts in seen:
                    result.sse_after_database_ms.append(at - seen[ts])
        result.collector_pauses = [(name, int(generation), float(ms), float(cpu_ms)) for name, generation, ms, cpu_ms
                                   in LONG_PAUSE.findall(honcho.log.read_text(errors="replace"))]
        for group in (exchange, honcho, sse):  # a run that went through keeps no logs
            stack.callback(group.log.unlink, missing_ok=True)
        return result


def _read_sse(path: Path) -> dict:
    bars: dict = {"__reconnects__": 0}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts[0] == "R":
            bars["__reconnects__"] += 1
        elif len(parts) == 3:
            bars.setdefault(parts[0], []).append((int(parts[1]), float(parts[2])))
    return bars


# -- the SSE client process ----------------------------------------------------------------------

def sse_client_main(url: str, key: str, out_path: str, names: list[str]) -> int:
    """One SSE stream per pair in one asyncio process; each bar as `<pair> <ts_ms> <receive
    ms>` to out_path; a dropped stream resumes with its Last-Event-ID (`R ...` lines)."""
    import asyncio

    import aiohttp
    import orjson

    out = open(out_path, "a", buffering=1 << 16)
    stopping = asyncio.Event()

    async def stream(session, name):
        last_id = None
        while not stopping.is_set():
            headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
            if last_id:
                headers["Last-Event-ID"] = last_id
            try:
                async with session.get(f"{url}/api/v1/streams/binance/{name}/USDT/events", headers=headers) as response:
                    if response.status != 200:
                        raise RuntimeError(f"HTTP {response.status}")
                    event = None
                    async for raw in response.content:
                        line = raw.decode().rstrip("\r\n")
                        if line.startswith("event:"):
                            event = line[6:].strip()
                        elif line.startswith("id:"):
                            last_id = line[3:].strip()
                        elif line.startswith("data:") and event == "bar":
                            at = time.time() * 1000
                            out.write(f"{name} {orjson.loads(line[5:])['ts_ms']} {at:.1f}\n")
                        elif not line:
                            event = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: note it, resume
                out.write(f"R {name} {time.time() * 1000:.0f} {type(exc).__name__}\n")
            if not stopping.is_set():
                out.write(f"R {name} {time.time() * 1000:.0f} ended\n")
                await asyncio.sleep(1.0)

    async def main():
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
            tasks = [asyncio.ensure_future(stream(session, name)) for name in names]

            async def flush():
                while not stopping.is_set():
                    out.flush()
                    await asyncio.sleep(0.5)
            flusher = asyncio.ensure_future(flush())
            await stopping.wait()
            for task in tasks + [flusher]:
                task.cancel()
            await asyncio.gather(*tasks, flusher, return_exceptions=True)
        out.flush()

    asyncio.run(main())
    out.close()
    return 0


# -- rows ------------------------------------------------------------------------------------------

def _s(ms: float) -> str:
    return f"{ms / 1000:.2f} s"


def _pauses(result: ScaleResult) -> str:
    """The collector pauses of 0.1 s or more the server processes logged, by process and
    generation, with the CPU the collections used: a pause far longer than its CPU was the
    process waiting for a core."""
    by: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for name, generation, ms, cpu_ms in result.collector_pauses:
        by.setdefault((name, generation), []).append((ms, cpu_ms))
    if not by:
        return "no collector pause of 0.1 s or more"
    parts = []
    for (name, generation), pauses in sorted(by.items()):
        longest_ms, longest_cpu_ms = max(pauses)
        parts.append(f"{name} generation {generation}: {len(pauses)} (longest {longest_ms:.0f} ms, of it "
                     f"{longest_cpu_ms:.0f} ms of CPU; {sum(cpu for _, cpu in pauses):.0f} of "
                     f"{sum(ms for ms, _ in pauses):.0f} ms in all)")
    return "collector pauses of 0.1 s or more: " + ", ".join(parts)


def _late_spells(result: ScaleResult) -> str:
    """Where the bars later than the goal were: runs of consecutive late seconds, each with its
    start (UTC), length and most pairs late at once; a stall of one process shows as one spell
    of about half the pairs."""
    if not result.late_seconds:
        return f"no bar later than {_s(LAG_GOAL_MS)}"
    spells: list[list[int]] = []
    for second in sorted(result.late_seconds):
        if spells and second - spells[-1][-1] <= 1000:
            spells[-1].append(second)
        else:
            spells.append([second])
    described = [f"{time.strftime('%H:%M:%S', time.gmtime(spell[0] / 1000))} for {len(spell)} s, "
                 f"up to {max(result.late_seconds[second] for second in spell)} pairs" for spell in spells[:5]]
    more = f" and {len(spells) - 5} more" if len(spells) > 5 else ""
    return (f"{sum(result.late_seconds.values())} bars later than {_s(LAG_GOAL_MS)} in {len(spells)} spells: "
            + "; ".join(described) + more)


def row_for(result: ScaleResult) -> dict:
    n = result.pairs
    if result.error and not result.lag_ms:
        return {"figure": f"scale, {n} busy live pairs (full mode as `make run-full`)", "value": f"broke: {result.error}",
                "comparison": "", "goal": f"bar lag p99 <= {LAG_GOAL_MS / 1000:g} s", "met": False}
    cores = result.cpu_cores
    hours = result.pairs * result.seconds / 3600
    value = (f"bar lag p50 {_s(percentile(result.lag_ms, 50))} / p99 {_s(percentile(result.lag_ms, 99))} "
             f"({len(result.lag_ms)} bars; first seen by a {POLL_SECONDS * 1000:.0f} ms poll or on SSE; "
             f"p99 {_s(percentile(result.lag_at_minute_start_ms, 99))} over the seconds :00-:02 of a minute); "
             f"live {statistics.median(result.live_s):.1f} s after subscribing (max {max(result.live_s):.1f} s, "
             f"READY {result.ready}/{n}); "
             f"missing {result.missing}, doubled {result.doubled_stored} stored / {result.doubled_sse} on SSE; "
             f"SSE delivery p99 {_s(percentile(result.sse_after_second_ms, 99))} after the second, "
             f"{_s(percentile(result.sse_after_database_ms, 99))} after the database")
    comparison = (
        f"ingestion {result.per_message_us('ingestion'):.0f} us per exchange message "
        f"({cores.get('ingestion', 0):.2f} core, {result.messages / result.seconds:,.0f} msg/s); "
        f"web {cores.get('web', 0):.2f} core; PostgreSQL {cores.get('postgres (run' + chr(39) + 's database)', 0):.2f} "
        f"core on the run's database ({result.cpu.get('postgres (run' + chr(39) + 's database)', 0) / hours:.1f} "
        f"CPU-s per pair-hour), {cores.get('postgres (server)', 0):.2f} core server-wide, "
        f"WAL {result.wal_bytes / hours / 1e6:.1f} MB per pair-hour (server-wide), the run's database "
        f"grew {result.database_growth_bytes / hours / 1e6:.1f} MB per pair-hour; "
        f"redis {cores.get('redis (server)', 0):.2f} core; load generator apart: exchange "
        f"{cores.get('exchange', 0):.2f} core (at most {result.exchange_behind_ms:.0f} ms behind its schedule), "
        f"SSE clients {cores.get('sse clients', 0):.2f} core; machine {result.machine_cores:.2f} of "
        f"{os.cpu_count()} cores busy; resyncs {result.resyncs}, disconnects {result.disconnects}, "
        f"SSE reconnects {result.sse_reconnects}; {_late_spells(result)}; {_pauses(result)}")
    return {"figure": f"scale, {n} busy live pairs for {result.seconds:.0f} s (full mode as `make run-full`)",
            "value": value, "comparison": comparison,
            "goal": f"bar lag p99 <= {LAG_GOAL_MS / 1000:g} s, none missing or doubled", "met": result.held}


def run() -> list[dict]:
    admin_url = os.environ.get("BENCH_DATABASE_URL")
    redis_url = os.environ.get("BENCH_REDIS_URL", os.environ.get("REDIS_URL", ""))
    if not admin_url or not redis_url:
        return [{"figure": "scale (bench_scale)", "value": "skipped: needs BENCH_DATABASE_URL and BENCH_REDIS_URL",
                 "comparison": "", "goal": "", "met": None}]
    counts = [int(n) for n in os.environ.get("BENCH_SCALE_PAIRS", "10,25,50,100,200").split(",") if n.strip()]
    seconds = float(os.environ.get("BENCH_SCALE_SECONDS", 300))
    rows, held, tried = [], 0, []
    for n in counts:
        print(f"bench_scale: {n} pairs for {seconds:.0f} s", file=sys.stderr, flush=True)
        try:
            result = measure(n, seconds, admin_url=admin_url, redis_url=redis_url,
                             log=lambda text: print(text, file=sys.stderr, flush=True))
        except Exception as exc:  # noqa: BLE001 - a run that fails is a broken run, reported
            import traceback

            traceback.print_exc()
            result = ScaleResult(n, seconds, error=f"{type(exc).__name__}: {str(exc)[:300]}")
        tried.append(n)
        rows.append(row_for(result))
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
        if not result.held:
            break
        held = n
    rows.insert(0, {"figure": f"scale: most busy live pairs held for {seconds:.0f} s with bar lag p99 <= "
                              f"{LAG_GOAL_MS / 1000:g} s, {os.cpu_count()} cores (load generator, PostgreSQL and "
                              "Redis on them)",
                    "value": f"{held} pairs" if held else "none", "comparison": f"tried {', '.join(map(str, tried))}",
                    "goal": f">= {HEADLINE_GOAL_PAIRS} pairs, 300 s", "met": held >= HEADLINE_GOAL_PAIRS and seconds >= 300})
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "sse-client":
        sys.exit(sse_client_main(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanups run on the way out
    for row in run():
        print(json.dumps(row))
