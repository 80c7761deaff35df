"""The live SSE feed at 1,000 and 5,000 concurrent streams on one daphne process in full
mode (PostgreSQL + Redis): server memory per idle connection, OS threads and PostgreSQL
connections before and after opening them, then the share of bars delivered and the delivery
latency from a Redis publish to each client.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
    BENCH_REDIS_URL=redis://127.0.0.1:6379/0 python bench/bench_sse.py

BENCH_SSE_COUNTS (default "1000,5000"), BENCH_SSE_BARS (20), BENCH_SSE_INTERVAL (0.5 s) and
BENCH_SSE_BATCH (200 connections opened at a time) tune the run. A warm-up of 200 streams,
opened and closed, comes first, so the "before" figures already include the worker threads
and pooled DB connections that authorising streams needs at all; what is left to grow is
what each open stream costs.

The clients are raw asyncio streams in this process (HTTP/1.1, the SSE body scanned for bar
blocks with a regex, no JSON parsing), so 5,000 of them stay cheap. Bars are published
straight to the Redis channel the server's bridge listens on, in the shape hub.publish()
writes; no ingestion runs. The comparison is a figure measured earlier on this machine
(not in this run) with django-eventstream's own view."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_metering import _database, seed_demo_key  # noqa: E402

COUNTS = sorted(int(n) for n in os.environ.get("BENCH_SSE_COUNTS", "1000,5000").split(",") if n.strip())
BARS = int(os.environ.get("BENCH_SSE_BARS", 20))
INTERVAL = float(os.environ.get("BENCH_SSE_INTERVAL", 0.5))
BATCH = int(os.environ.get("BENCH_SSE_BATCH", 200))
WARMUP = 200  # streams opened and closed before the baseline: code paths, worker threads and DB pool warm
EVENTS = "/api/v1/streams/binance/BTC/USDT/events"
# streaming.hub.redis_channel() for the bench's Redis URL (not imported: that needs Django settings)
REDIS_CHANNEL = "mdp:live-events:" + (os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[-1] or "0")

GOAL_P99_MS = {1000: 100.0, 5000: 750.0}  # delivery p99 by stream count
GOAL_OPENS_PER_SECOND = 400.0
DB_POOL_MAX = 16  # config/settings/base.py: the server's connections are bounded by its pool, not by its streams
GOAL_KB_PER_CONNECTION = 40.0
THREAD_SLACK = 8  # bounded pools (executor, DB pool workers) may add a few threads; a thread per stream may not
COMPARISON = ("plain django-eventstream view: 1 OS thread and ~59 KB per connection, p99 ~300 ms at 1,000 clients, "
              "~1.5 s at 5,000 (measured earlier on this machine)")

# `event: bar`, then the id line, then the data line, whose JSON object starts with ts_ms.
BAR = re.compile(rb'event: bar\n(?:id: [^\n]*\n)?data: \{"ts_ms":(\d+)')
STATUS = b"event: status\n"
ENDING = (b"event: error\n", b"event: stream-closed\n")


def log(message: str) -> None:
    print(f"[bench_sse] {message}", file=sys.stderr, flush=True)


# --- the server process, from /proc and pg_stat_activity ---------------------------------

def _proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(value.split()[0])
    return out


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _db_connections(admin_url: str, database: str) -> int:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()[0]


def _server_state(pid: int, admin_url: str, database: str) -> dict:
    status = _proc_status(pid)
    return {"rss_kb": status["VmRSS"], "threads": status["Threads"], "db": _db_connections(admin_url, database)}


# --- the clients ---------------------------------------------------------------------------

class Fleet:
    """What every client shares: the bar count that ends the wait, the publish table."""

    def __init__(self):
        self.delivered = 0
        self.target = 0
        self.done = asyncio.Event()
        self.foreign = 0  # bars whose ts_ms this benchmark did not publish
        self.published: dict[int, float] = {}


class Client:
    __slots__ = ("fleet", "reader", "writer", "tail", "status", "ended", "arrivals", "task")

    def __init__(self, fleet: Fleet, reader, writer):
        self.fleet, self.reader, self.writer = fleet, reader, writer
        self.tail = b""
        self.status = False
        self.ended: str | None = None
        self.arrivals: dict[int, float] = {}
        self.task: asyncio.Task | None = None

    def feed(self, data: bytes, now: float) -> None:
        """Scan complete SSE blocks (up to the last blank line); keep the rest for the next read.
        The body is chunked (HTTP/1.1), but the server sends whole events per chunk, so the
        chunk framing only ever sits between blocks."""
        buf = self.tail + data if self.tail else data
        cut = buf.rfind(b"\n\n")
        if cut < 0:
            self.tail = buf
            return
        cut += 2
        complete, self.tail = buf[:cut], buf[cut:]
        if not self.status and STATUS in complete:
            self.status = True
        if b"event: bar\n" in complete:
            fleet = self.fleet
            for match in BAR.finditer(complete):
                ts = int(match.group(1))
                if ts not in fleet.published:
                    fleet.foreign += 1
                elif ts not in self.arrivals:
                    self.arrivals[ts] = now
                    fleet.delivered += 1
                    if fleet.delivered >= fleet.target:
                        fleet.done.set()
        if b"event: " in complete and any(end in complete for end in ENDING):
            self.ended = complete[-300:].decode("utf-8", "replace")

    async def pump(self) -> None:
        read, clock = self.reader.read, time.perf_counter
        try:
            while True:
                data = await read(65536)
                if not data:
                    self.ended = self.ended or "closed by the server"
                    return
                self.feed(data, clock())
        except (ConnectionError, OSError) as exc:
            self.ended = self.ended or f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.writer.close()


class Refused(Exception):
    pass


async def _open_once(fleet: Fleet, host: str, port: int, request: bytes) -> Client:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line = head.split(b"\r\n", 1)[0]
        if b" 200 " not in status_line + b" ":
            body = await asyncio.wait_for(reader.read(2000), 5)
            raise Refused(f"{status_line.decode()}: {body[:300]!r}")
        client = Client(fleet, reader, writer)
        while not client.status:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("closed before the status event")
            client.feed(data, time.perf_counter())
        return client
    except BaseException:
        writer.close()
        raise


async def _open(fleet: Fleet, host: str, port: int, request: bytes, retries: list) -> Client:
    """One stream, open and past its status event; retried on transient failures."""
    for attempt in range(4):
        try:
            return await asyncio.wait_for(_open_once(fleet, host, port, request), 60)
        except Refused as exc:
            if not str(exc).startswith(("HTTP/1.1 503", "HTTP/1.0 503")) or attempt == 3:
                raise
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            if attempt == 3:
                raise
        retries.append(1)
        await asyncio.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


async def _open_all(fleet: Fleet, base: str, key: str, count: int) -> tuple[list[Client], float, int]:
    parts = urlsplit(base)
    request = (f"GET {EVENTS} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {key}\r\n"
               "Accept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n").encode()
    clients: list[Client] = []
    retries: list = []
    started = time.perf_counter()
    try:
        for first in range(0, count, BATCH):
            batch = await asyncio.gather(*(_open(fleet, parts.hostname, parts.port, request, retries)
                                           for _ in range(min(BATCH, count - first))), return_exceptions=True)
            failed = [c for c in batch if isinstance(c, BaseException)]
            clients.extend(c for c in batch if not isinstance(c, BaseException))
            if failed:
                raise RuntimeError(f"{len(failed)} of a batch of {len(batch)} streams failed to open: {failed[0]!r}")
    except BaseException:
        await _close_all(clients)
        raise
    elapsed = time.perf_counter() - started
    for client in clients:
        client.task = asyncio.ensure_future(client.pump())
    return clients, elapsed, len(retries)


async def _close_all(clients: list[Client]) -> None:
    for client in clients:
        client.close()
    tasks = [c.task for c in clients if c.task is not None]
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    closing = [c.writer.wait_closed() for c in clients]
    if closing:
        await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 30)


# --- publishing ----------------------------------------------------------------------------

def _bar_row(ts_ms: int, i: int) -> dict:
    price = 43000.0 + i
    return {"ts_ms": ts_ms, "open": price, "high": price + 10.5, "low": price - 9.75, "close": price + 1.75,
            "volume": 1.25, "buy_volume": 0.75, "sell_volume": 0.5, "trade_count": 3, "vwap": price + 0.5,
            "bid_depth": 210.5, "ask_depth": 190.25, "imbalance": 0.0505, "circulating_supply": 19_700_000.0,
            "bid_price": price + 1.5, "ask_price": price + 2.0, "mid_price": price + 1.75, "spread_bps": 0.116}


async def _publish_bars(fleet: Fleet, redis_url: str, pair_id: int, first_ts: int) -> list[int]:
    """BARS bars, one every INTERVAL; returns how many subscribers Redis reported for each."""
    import orjson
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    receivers = []
    try:
        started = time.perf_counter()
        for i in range(BARS):
            await asyncio.sleep(max(0.0, started + i * INTERVAL - time.perf_counter()))
            ts = first_ts + i * 1000
            payload = orjson.dumps({"c": f"pair-{pair_id}", "t": "bars", "d": {"rows": [_bar_row(ts, i)]}})
            fleet.published[ts] = time.perf_counter()
            receivers.append(await client.publish(REDIS_CHANNEL, payload))
    finally:
        await client.aclose()
    return receivers


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# --- one count -----------------------------------------------------------------------------

async def _measure(count: int, *, base: str, key: str, pair_id: int, redis_url: str, admin_url: str,
                   database: str, baseline: dict) -> dict:
    pid = base.pid
    fleet = Fleet()
    before = _server_state(pid, admin_url, database)
    log(f"N={count}: opening in batches of {BATCH} (server RSS {before['rss_kb'] / 1024:.1f} MiB, "
        f"{before['threads']} threads, {before['db']} DB connections)")
    clients, open_seconds, retries = await _open_all(fleet, base, key, count)
    log(f"N={count}: all open and past their status event in {open_seconds:.1f} s ({retries} retries)")
    try:
        await asyncio.sleep(3)  # idle: let the server settle after the connection burst
        after = _server_state(pid, admin_url, database)
        log(f"N={count}: idle RSS {after['rss_kb'] / 1024:.1f} MiB, {after['threads']} threads, "
            f"{after['db']} DB connections")

        # Past timestamps, strictly increasing: the streams here start with no bar seen, so
        # they take them, while another server sharing this Redis (tests, pair ids alike in
        # every fresh database) drops them as older than what it has already sent.
        first_ts = (int(time.time() * 1000) // 1000) * 1000 - 3_600_000 - (COUNTS.index(count) + 1) * 100_000
        fleet.target = count * BARS
        cpu_before, client_cpu_before = _cpu_seconds(pid), time.process_time()
        receivers = await _publish_bars(fleet, redis_url, pair_id, first_ts)
        try:
            await asyncio.wait_for(fleet.done.wait(), 20)
        except asyncio.TimeoutError:
            pass
        server_cpu, client_cpu = _cpu_seconds(pid) - cpu_before, time.process_time() - client_cpu_before

        latencies = sorted((t - fleet.published[ts]) * 1000 for c in clients for ts, t in c.arrivals.items())
        ended = [c.ended for c in clients if c.ended]
        if ended:
            log(f"N={count}: {len(ended)} streams ended early, e.g. {ended[0]!r}")
        if fleet.foreign:
            log(f"N={count}: {fleet.foreign} bar events this benchmark did not publish (another publisher on "
                "this Redis?)")
        if any(r != 1 for r in receivers):
            log(f"N={count}: Redis reported {sorted(set(receivers))} subscribers (expected 1: this server)")
        log(f"N={count}: delivered {fleet.delivered}/{fleet.target}; p50 {_percentile(latencies, .5):.1f} ms, "
            f"p99 {_percentile(latencies, .99):.1f} ms, max {latencies[-1] if latencies else float('nan'):.1f} ms; "
            f"server CPU {server_cpu:.2f} s, client CPU {client_cpu:.2f} s for {BARS} bars")
    finally:
        await _close_all(clients)
    await asyncio.sleep(max(3.0, count / 1000))  # let the server reap the closed streams
    closed = _server_state(pid, admin_url, database)
    log(f"N={count}: closed; RSS {closed['rss_kb'] / 1024:.1f} MiB, {closed['threads']} threads, "
        f"{closed['db']} DB connections")
    return {"count": count, "before": before, "after": after, "closed": closed, "baseline": baseline,
            "open_seconds": open_seconds, "retries": retries, "delivered": fleet.delivered, "target": fleet.target,
            "latencies": latencies, "server_cpu": server_cpu, "client_cpu": client_cpu, "ended": len(ended),
            "foreign": fleet.foreign}


def _rows(m: dict) -> list[dict]:
    n, lat = m["count"], m["latencies"]
    label = f"SSE {n:,} streams, 1 daphne process, full mode"
    share = m["delivered"] / m["target"] if m["target"] else 0.0
    p50, p99 = _percentile(lat, .5), _percentile(lat, .99)
    # Growth over the idle server before the first stream of the run: memory freed by a
    # smaller count's closed streams and reused here is not counted as free.
    kb = (m["after"]["rss_kb"] - m["baseline"]["rss_kb"]) / n
    threads = (m["before"]["threads"], m["after"]["threads"])
    db = (m["before"]["db"], m["after"]["db"])
    goal_p99 = GOAL_P99_MS.get(n)
    latency_goal = f"p99 < {goal_p99:.0f} ms" if goal_p99 else ""
    opens = n / m["open_seconds"]
    return [
        {"figure": f"{label}: bars delivered ({BARS} bars, one every {INTERVAL:g} s)",
         "value": f"{share * 100:.2f} % ({m['delivered']:,} of {m['target']:,}"
                  + (f"; {m['ended']} streams ended" if m["ended"] else "")
                  + (f"; {m['foreign']} bars from another publisher" if m["foreign"] else "") + ")",
         "comparison": COMPARISON, "goal": "100 %", "met": m["delivered"] == m["target"]},
        {"figure": f"{label}: delivery latency from Redis publish",
         "value": f"p50 {p50:.0f} ms, p99 {p99:.0f} ms (server CPU {m['server_cpu'] * 1000 / BARS:.0f} ms per bar)",
         "comparison": COMPARISON, "goal": latency_goal, "met": (p99 < goal_p99) if latency_goal else None},
        {"figure": f"{label}: server memory per idle connection",
         "value": f"{kb:.1f} KB (RSS {m['baseline']['rss_kb'] / 1024:.0f} -> {m['after']['rss_kb'] / 1024:.0f} MiB)",
         "comparison": COMPARISON, "goal": f"< {GOAL_KB_PER_CONNECTION:.0f} KB", "met": kb < GOAL_KB_PER_CONNECTION},
        {"figure": f"{label}: OS threads of the server, before -> after opening",
         "value": f"{threads[0]} -> {threads[1]}",
         "comparison": COMPARISON, "goal": f"no thread per connection (at most +{THREAD_SLACK})",
         "met": threads[1] - threads[0] <= THREAD_SLACK},
        {"figure": f"{label}: PostgreSQL connections of the server, before -> after opening",
         "value": f"{db[0]} -> {db[1]}",
         "comparison": COMPARISON, "goal": f"bounded by the pool ({DB_POOL_MAX}), not by the streams",
         "met": db[1] <= DB_POOL_MAX},
        {"figure": f"{label}: time to open all streams (batches of {BATCH}, each past its status event)",
         "value": f"{m['open_seconds']:.1f} s ({opens:.0f} streams/s"
                  + (f", {m['retries']} retries" if m["retries"] else "") + ")",
         "comparison": COMPARISON, "goal": f">= {GOAL_OPENS_PER_SECOND:.0f} streams/s",
         "met": opens >= GOAL_OPENS_PER_SECOND},
    ]


# --- the run -------------------------------------------------------------------------------

def _seed(env: dict, database_url: str) -> tuple[str, int]:
    import psycopg

    key = seed_demo_key(env)
    with psycopg.connect(database_url) as conn:
        pair_id = conn.execute(
            "SELECT p.id FROM market_pair p JOIN market_exchange e ON e.id = p.exchange_id "
            "JOIN market_asset b ON b.id = p.base_id JOIN market_asset q ON q.id = p.quote_id "
            "WHERE e.slug = 'binance' AND b.symbol = 'BTC' AND q.symbol = 'USDT'").fetchone()[0]
    return key, pair_id


async def _bench(base, key: str, pair_id: int, redis_url: str, admin_url: str, database: str) -> list[dict]:
    warm = Fleet()
    clients, seconds, _ = await _open_all(warm, base, key, WARMUP)
    log(f"warm-up: {WARMUP} streams opened in {seconds:.1f} s, closing")
    await _close_all(clients)
    await asyncio.sleep(3)
    baseline = _server_state(base.pid, admin_url, database)
    results = []
    for count in COUNTS:
        results.append(await _measure(count, base=base, key=key, pair_id=pair_id, redis_url=redis_url,
                                      admin_url=admin_url, database=database, baseline=baseline))
    return results


def _event_loop():
    try:
        import uvloop  # the client side of 5,000 streams is cheaper on uvloop; the server is untouched

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def run() -> list[dict]:
    from tests.integration.servers import daphne_processes

    admin_url = os.environ.get("BENCH_DATABASE_URL", "")
    redis_url = os.environ.get("BENCH_REDIS_URL", "")
    if not admin_url.startswith("postgres") or not redis_url:
        raise RuntimeError("bench_sse needs full mode: BENCH_DATABASE_URL (PostgreSQL) and BENCH_REDIS_URL")
    database_url, drop = _database(admin_url)
    database = database_url.rpartition("/")[2]
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "tests.integration.settings",
           "INGESTION_AUTOSTART": "false"}
    try:
        key, pair_id = _seed(env, database_url)
        with daphne_processes(1, env=env) as (base,):
            log(f"daphne pid {base.pid} at {base}; pair id {pair_id}")
            with asyncio.Runner(loop_factory=_event_loop) as runner:
                results = runner.run(_bench(base, key, pair_id, redis_url, admin_url, database))
    finally:
        drop()
    return [row for result in results for row in _rows(result)]


def _markdown(rows: list[dict]) -> str:
    lines = ["| figure | ours | comparison | goal | met |", "|---|---|---|---|---|"]
    for row in rows:
        met = {True: "yes", False: "**no**"}.get(row["met"], "")
        lines.append(f"| {row['figure']} | {row['value']} | {row['comparison']} | {row['goal']} | {met} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(_markdown(run()))
