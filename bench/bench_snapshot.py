"""A 24-hour second-granularity snapshot (86,400 bars, all three metrics) through the full
stack on PostgreSQL, in JSON and in TOON: time to the last byte and the server's peak
memory growth, beside the time of a raw psycopg fetch of the same rows, in one run.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python bench/bench_snapshot.py

With BENCH_HISTORY_DATABASE_URL (a database holding `manage.py history_synthesize`'s
history, e.g. 200 pairs x 3 days of second bars), the snapshot is the last whole day of
SYN001-USDT's seconds, read from that large table; the database is used as it is.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_metering import _database, seed_demo_key  # noqa: E402
from bench_series import stored_rows  # noqa: E402

DAY_MS = 86_400_000
GOAL_RATIO = 3.0


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _seed(env: dict) -> tuple[str, int, int]:
    """Migrate, seed the demo, write 86,400 second bars for binance/BTC/USDT."""
    code = f"""
import django, os, sys
sys.path.insert(0, {str(ROOT)!r})
django.setup()
from market.bars import Bar
from market.models import Pair
from market.services import bars_write
from streaming.models import IngestionState
pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
end = ({int(time.time() * 1000)} // 60000) * 60000
start = end - {DAY_MS}
bars = [Bar(ts_ms=start + i * 1000, trade_count=3, open=43000.0 + i % 97, high=43010.5 + i % 97, low=42990.25,
            close=43001.75, volume=1.25, buy_volume=0.75, sell_volume=0.5, notional=53752.19, price_mean=43001.0,
            price_m2=12.5, book_samples=1, bid_amount_sum=210.5 + i % 13, ask_amount_sum=190.25,
            bid_notional_sum=9.1e6, ask_notional_sum=8.2e6, bid_orders_sum=40, ask_orders_sum=38, quote_count=4,
            bid_price=43001.5, ask_price=43002.0, spread_bps_sum=0.46, spread_bps_min=0.1, spread_bps_max=0.2)
        for i in range(86400)]
for i in range(0, len(bars), 3600):
    bars_write(pair=pair, granularity="second", bars=bars[i:i + 3600])
IngestionState.objects.update_or_create(pair=pair, defaults={{"cursor_ms": end}})
print("RANGE", pair.pk, start, end)
"""
    full_env = {**os.environ, **env}
    key = seed_demo_key(env)
    ranged = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full_env, check=True, capture_output=True,
                            text=True).stdout.split()
    _, pair_id, start, end = ranged[ranged.index("RANGE"):][:4]
    return key, int(start), int(end), int(pair_id)


def _synthesized_day(env: dict) -> tuple[str, int, int, int]:
    """The demo key, and the last 86,400 second bars of the synthesised SYN001-USDT."""
    import psycopg

    key = seed_demo_key(env)
    # second bars are read by subscribers of the pair's stream (API.md), as the demo is to binance/BTC/USDT
    subscribe = f"""
import django, sys
sys.path.insert(0, {str(ROOT)!r})
django.setup()
from accounts.models import Account
from config.management.commands.seed_demo import DEMO_EMAIL
from market.models import Pair
from streaming.services import subscription_upsert
subscription_upsert(account=Account.objects.get(users__email=DEMO_EMAIL),
                    pair=Pair.objects.get(exchange__slug="synthetic", base__symbol="SYN001", quote__symbol="USDT"),
                    metrics=["trade", "book", "quote"])
"""
    subprocess.run([sys.executable, "-c", subscribe], cwd=ROOT, env={**os.environ, **env}, check=True)
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        pair_id, = conn.execute("SELECT p.id FROM market_pair p JOIN market_exchange e ON e.id = p.exchange_id "
                                "JOIN market_asset b ON b.id = p.base_id WHERE e.slug = 'synthetic' "
                                "AND b.symbol = 'SYN001'").fetchone()
        # the newest second: a row of an open minute, or the last of a pack (market/bar_pack.py)
        last, = conn.execute("SELECT GREATEST((SELECT MAX(ts_ms) FROM market_secondbar WHERE pair_id = %s), "
                             "(SELECT minute_ts_ms + 59000 FROM market_secondbarpack WHERE pair_id = %s "
                             "ORDER BY minute_ts_ms DESC LIMIT 1))", (pair_id, pair_id)).fetchone()
        held = stored_rows(conn, "market_secondbar") + 60 * stored_rows(conn, "market_secondbarpack")
    end = last + 1000
    return key, end - DAY_MS, end, pair_id, held


def _raw_fetch(database_url: str, pair_id: int, start: int, end: int) -> float:
    """The bars' values fetched by psycopg: the rows of minutes not packed yet and the
    packs, decoded (market/bar_pack.py), every column."""
    import psycopg

    from market import bar_pack
    from market.bars import BAR_FIELDS

    with psycopg.connect(database_url) as conn:
        started = time.perf_counter()
        rows = conn.execute(f"SELECT {', '.join(BAR_FIELDS)} FROM market_secondbar WHERE pair_id = %s "
                            "AND ts_ms >= %s AND ts_ms < %s ORDER BY ts_ms", (pair_id, start, end)).fetchall()
        for minute, seconds, data in conn.execute(
                "SELECT minute_ts_ms, seconds, data FROM market_secondbarpack WHERE pair_id = %s "
                "AND minute_ts_ms > %s AND minute_ts_ms < %s ORDER BY minute_ts_ms",
                (pair_id, start - bar_pack.MINUTE_MS, end)):
            rows += [row for row in bar_pack.decode(minute, seconds, data) if start <= row[0] < end]
        elapsed = time.perf_counter() - started
    assert len(rows) == 86_400
    return elapsed


def run() -> list[dict]:
    import httpx

    from tests.integration.servers import daphne_processes

    history_url = os.environ.get("BENCH_HISTORY_DATABASE_URL")
    database_url, drop = (history_url, lambda: None) if history_url else _database(os.environ.get("BENCH_DATABASE_URL"))
    env = {"DATABASE_URL": database_url, "REDIS_URL": os.environ.get("BENCH_REDIS_URL", ""),
           "DJANGO_SETTINGS_MODULE": "tests.integration.settings"}
    rows = []
    try:
        if history_url:
            key, start, end, pair_id, held = _synthesized_day(env)
            symbol, table = "synthetic/SYN001/USDT", f", a table of {held / 1e6:.0f} M second bars"
        else:
            (key, start, end, pair_id), symbol, table = _seed(env), "binance/BTC/USDT", ""
        raw = statistics.median(_raw_fetch(database_url, pair_id, start, end) for _ in range(3))
        with daphne_processes(1, env=env) as (base,):
            pid = base.pid
            body = {"metrics": ["trade", "book", "quote"], "granularity": "second", "from_ms": start, "to_ms": end}
            for fmt in ("json", "toon"):
                times, size = [], 0
                before = _peak_kib(pid)
                for _ in range(3):
                    started = time.perf_counter()
                    with httpx.stream("POST", f"{base}/api/v1/streams/{symbol}/snapshot",
                                      json={**body, "format": fmt}, headers={"Authorization": f"Bearer {key}"},
                                      timeout=120) as response:
                        assert response.status_code == 200, response.read()[:300]
                        size = sum(len(chunk) for chunk in response.iter_raw())
                    times.append(time.perf_counter() - started)
                growth_mib = (_peak_kib(pid) - before) / 1024
                elapsed = statistics.median(times)
                rows.append({
                    "figure": f"snapshot 86,400 second bars, 3 metrics, {fmt.upper()} ({size / 1e6:.1f} MB), "
                              f"PostgreSQL{table}",
                    "value": f"{elapsed * 1000:.0f} ms ({elapsed / raw:.1f}x raw), peak +{growth_mib:.0f} MiB",
                    "comparison": f"raw psycopg fetchall {raw * 1000:.0f} ms",
                    "goal": f"<= {GOAL_RATIO:.0f}x raw fetch", "met": elapsed <= GOAL_RATIO * raw})
    finally:
        drop()
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
