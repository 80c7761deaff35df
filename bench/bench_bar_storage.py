"""Bytes a stored bar takes in PostgreSQL, with its indexes, on real data: the Binance
BTCUSDT and ETHUSDT recordings of data/realdata ingested through the ingestion path
(replay source, PairIngestor, bars_write), in a fresh database migrated from scratch.
Size = heap + TOAST + every index, summed over the table's partitions, after VACUUM, divided
by the bars: what one more bar costs on disk. Second bars count both tiers: the rows of
minutes not packed yet and the minute packs (market/bar_pack.py); also the cost of reading
them back (decoding the packs) against the same bars all stored as rows.

Also the multi-pair write (one tick of 100 pairs, one bar each) against one bars_write per
pair, per bar, on the same database.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python bench/bench_bar_storage.py
    BENCH_SKIP_DROP=1: without the retention drop measure (a day of 200 pairs' rows)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_metering import _database  # noqa: E402

GOAL_BYTES = 150
COPIES = 48
RECORDINGS = {"BTC": "btcusdt_20240808.gz", "ETH": "ethusdt_20240808.gz"}

MEASURE = """
import json, os, sys, tempfile, time
sys.path.insert(0, {root!r})
import django
django.setup()
from pathlib import Path
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from django.db import connection, transaction
from market.models import BAR_MODELS, Exchange, Pair
from market.services import asset_ensure
from market.sources.events import PairRef
from market.sources.replay import write_jsonl
from market.sources.venues import binance_recording_events
from streaming.ingestion import ingestion_want
from streaming.ingestor import PairIngestor
from streaming.sources import _source

folder = Path(tempfile.mkdtemp(prefix="bench-bars-"))
recordings = Path({root!r}) / "data" / "realdata" / "binance-spot"
exchange = Exchange.objects.create(slug="binance", name="Binance", source=Exchange.Source.REPLAY,
                                   replay_path=str(folder))
pairs = []
for base, name in {recordings_map!r}.items():
    events = sorted(binance_recording_events(recordings / name, base + "USDT"), key=lambda e: e.ts_ms)
    write_jsonl(events, PairRef("binance", base, "USDT"), folder / (base.lower() + "usdt.jsonl.gz"))
    pair = Pair.objects.create(exchange=exchange, base=asset_ensure(base), quote=asset_ensure("USDT"))
    ingestion_want(pair=pair)
    pairs.append(pair)
_source.cache_clear()
for pair in pairs:
    ingestor = PairIngestor(pair)
    while ingestor.step(2_000_000_000_000) is not None:
        pass

# The recordings are minutes long: their bars are copied to {copies} more pairs, tick by tick
# (ordered by time, then pair, as live ingestion interleaves them), so the tables and
# their indexes reach a size where a page more or less does not count.
from market.bars import BAR_FIELDS
columns = ", ".join(BAR_FIELDS)
from market.partitions import partitions_ensure
from market.models import SecondBarPack
with connection.cursor() as cursor:
    cursor.execute("SELECT DISTINCT minute_ts_ms FROM market_secondbarpack")
    with transaction.atomic():
        partitions_ensure(SecondBarPack, [minute for (minute,) in cursor.fetchall()])
copies = [(pair.pk, Pair.objects.create(exchange=exchange, base=asset_ensure(f"COPY{{i}}{{pair.base.symbol}}"),
                                        quote=pair.quote).pk)
          for i in range({copies} // len(pairs)) for pair in pairs]
mapping = ", ".join(f"({{original}}, {{copy}})" for original, copy in copies)
with connection.cursor() as cursor:
    for granularity, model in BAR_MODELS.items():
        table = model._meta.db_table
        cursor.execute(f"INSERT INTO {{table}} (pair_id, {{columns}}) SELECT m.copy, {{columns}} FROM {{table}} s "
                       f"JOIN (VALUES {{mapping}}) AS m(original, copy) ON m.original = s.pair_id "
                       f"ORDER BY s.ts_ms, m.copy")
    cursor.execute(f"INSERT INTO market_secondbarpack (pair_id, minute_ts_ms, seconds, data) "
                   f"SELECT m.copy, minute_ts_ms, seconds, data FROM market_secondbarpack s "
                   f"JOIN (VALUES {{mapping}}) AS m(original, copy) ON m.original = s.pair_id "
                   f"ORDER BY s.minute_ts_ms, m.copy")

sizes = {{}}
with connection.cursor() as cursor:
    for granularity, model in BAR_MODELS.items():
        table = model._meta.db_table
        cursor.execute(f"VACUUM ANALYZE {{table}}")
        cursor.execute(
            "SELECT COALESCE(SUM(pg_table_size(relid)), 0), COALESCE(SUM(pg_indexes_size(relid)), 0) "
            "FROM (SELECT relid FROM pg_partition_tree(%s) WHERE isleaf "
            "      UNION SELECT %s::regclass WHERE (SELECT relkind FROM pg_class WHERE oid = %s::regclass) = 'r') t",
            [table, table, table])
        heap, indexes = cursor.fetchone()
        cursor.execute(f"SELECT COUNT(*) FROM {{table}}")
        rows = cursor.fetchone()[0]
        sizes[granularity] = {{"rows": rows, "heap": int(heap), "indexes": int(indexes)}}
        # a closed day's index rebuilt: the interleaved writes of many pairs split index
        # pages in the middle, half full; a rebuilt index packs them
        cursor.execute(f"REINDEX TABLE {{table}}")
        cursor.execute("SELECT COALESCE(SUM(pg_indexes_size(relid)), 0) FROM (SELECT relid FROM pg_partition_tree(%s) "
                       "WHERE isleaf UNION SELECT %s::regclass WHERE (SELECT relkind FROM pg_class "
                       "WHERE oid = %s::regclass) = 'r') t", [table, table, table])
        sizes[granularity]["indexes_rebuilt"] = int(cursor.fetchone()[0])
# The second bars' two tiers together: rows (the minutes not packed yet) and packs (one
# row per pair and minute, market/bar_pack.py), TOAST included.
from market import bar_pack
with connection.cursor() as cursor:
    cursor.execute("SELECT COALESCE(SUM(pg_table_size(relid)), 0), COALESCE(SUM(pg_indexes_size(relid)), 0) "
                   "FROM pg_partition_tree('market_secondbarpack') WHERE isleaf")
    heap, indexes = cursor.fetchone()
    cursor.execute("SELECT COUNT(*), COALESCE(SUM(length(data)), 0) FROM market_secondbarpack")
    packs, values = cursor.fetchone()
    cursor.execute("SELECT seconds FROM market_secondbarpack")
    packed = sum(mask.bit_count() for (mask,) in cursor.fetchall())
    sizes["second, packed tier"] = {{"rows": packed, "packs": packs, "heap": int(heap), "indexes": int(indexes),
                                     "values": int(values)}}

# Decoding: one pair's second bars read with every field through the selector (both
# tiers), against the same bars all stored as rows (a pair written with row inserts only),
# best of 5, per bar.
from market.selectors import bars_range
from market.models import SecondBar
pair = pairs[0]
bars = list(bars_range(pair=pair, granularity="second", from_ms=0, to_ms=1 << 62))
rows_pair = Pair.objects.create(exchange=exchange, base=asset_ensure("ROWS"), quote=pair.quote)
SecondBar.objects.bulk_create([SecondBar(pair=rows_pair, **{{name: getattr(bar, name) for name in BAR_FIELDS}})
                               for bar in bars])
timings = {{}}
for name, reader in (("both tiers", pair), ("rows only", rows_pair)):
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        got = list(bars_range(pair=reader, granularity="second", from_ms=0, to_ms=1 << 62))
        best = min(best, time.perf_counter() - began)
    assert got == bars
    timings[name] = best / len(bars)
with connection.cursor() as cursor:
    cursor.execute("SELECT minute_ts_ms, seconds, data FROM market_secondbarpack WHERE pair_id = %s", [pair.pk])
    blobs = cursor.fetchall()
began = time.perf_counter()
for _ in range(5):
    decoded = sum(len(bar_pack.decode(minute, seconds, data)) for minute, seconds, data in blobs)
timings["decode only"] = (time.perf_counter() - began) / (5 * decoded)
sizes["read"] = {{"rows": len(bars), **timings}}
print("BENCH-SIZES " + json.dumps(sizes))
"""

MULTI_PAIR = """
import json, sys, time
sys.path.insert(0, {root!r})
import django
django.setup()
from django.db import transaction
from market.bars import Bar
from market.models import Exchange, Pair
from market.services import asset_ensure, bars_write, bars_write_many

exchange = Exchange.objects.create(slug="multi", name="Multi")
quote = asset_ensure("USDT")
pairs = [Pair.objects.create(exchange=exchange, base=asset_ensure(f"T{{i:03d}}"), quote=quote) for i in range({pairs})]
start = (int(time.time()) // 3600) * 3_600_000


def bar(ts, i):
    return Bar(ts_ms=ts, trade_count=3, open=100.0 + i, high=101.0 + i, low=99.5 + i, close=100.5 + i, volume=1.5,
               buy_volume=1.0, sell_volume=0.5, notional=150.75, price_mean=100.25 + i, price_m2=0.5, book_samples=1,
               bid_amount_sum=20.5, ask_amount_sum=19.25, bid_notional_sum=2050.0, ask_notional_sum=1930.0,
               bid_orders_sum=40, ask_orders_sum=38, quote_count=4, bid_price=100.0 + i, ask_price=100.5 + i,
               spread_bps_sum=2.0, spread_bps_min=0.4, spread_bps_max=0.6)


def per_pair(ts):
    with transaction.atomic():
        for i, pair in enumerate(pairs):
            bars_write(pair=pair, granularity="second", bars=[bar(ts, i)])


def together(ts):
    with transaction.atomic():
        bars_write_many(granularity="second", bars_by_pair=[(pair, [bar(ts, i)]) for i, pair in enumerate(pairs)])


timings = {{}}
for name, write, offset in (("per_pair", per_pair, 0), ("together", together, 1_800_000)):
    write(start + offset)  # warm: statements prepared, partitions known
    took = []
    for second in range(1, {ticks} + 1):
        began = time.perf_counter()
        write(start + offset + second * 1000)
        took.append(time.perf_counter() - began)
    took.sort()
    timings[name] = took[len(took) // 2] / {pairs}
# the tick that passes a minute's end packs that minute of every pair (one insert, one delete)
took = []
for minute in range(1, 4):
    closing = start + 600_000 + minute * 60_000  # minutes 11 to 13: no bar written there yet
    for second in range(-59, 0):
        together(closing + second * 1000)
    began = time.perf_counter()
    together(closing)
    took.append(time.perf_counter() - began)
timings["packing"] = sorted(took)[1] / {pairs}
print("BENCH-MULTI " + json.dumps(timings))
"""


DROP_DAY = """
import json, sys, time
sys.path.insert(0, {root!r})
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from django.db import connection
from market.bars import DAY_MS
from market.services import bars_purge, history_synthesize, synthetic_pairs_ensure

now = int(time.time() * 1000)
day = now - 10 * DAY_MS - (now - 10 * DAY_MS) % DAY_MS
began = time.perf_counter()
# the day as the store holds it: every minute packed (history_synthesize writes what ingestion leaves)
for index, (pair, prof) in enumerate(synthetic_pairs_ensure(count={pairs}, seed=0)):
    history_synthesize(pair=pair, prof=prof, index=index, seed=0, end_ms=day + DAY_MS, second_days=1, hour_days=1)
suffix = time.strftime('%Y%m%d', time.gmtime(day / 1000))
with connection.cursor() as cursor:
    cursor.execute("SELECT COALESCE(SUM(bit_count(seconds::bit(64))), 0) FROM market_secondbarpack "
                   "WHERE minute_ts_ms >= %s AND minute_ts_ms < %s", [day, day + DAY_MS])
    packed = int(cursor.fetchone()[0])
    cursor.execute("SELECT COUNT(*) FROM market_secondbar WHERE ts_ms >= %s AND ts_ms < %s", [day, day + DAY_MS])
    rows = cursor.fetchone()[0] + packed
    cursor.execute("SELECT COALESCE(pg_total_relation_size(to_regclass(%s)), 0) + pg_total_relation_size(%s)",
                   [f"market_secondbar_p{{suffix}}", f"market_secondbarpack_p{{suffix}}"])
    size = cursor.fetchone()[0]
synthesis = time.perf_counter() - began
cursor = connection.cursor()
cursor.execute("CHECKPOINT")  # the synthesis' dirty pages are not the drop's cost
first_drop = []


def note_drop(execute, sql, params, many, context):
    if sql.startswith("DROP TABLE") and not first_drop:
        first_drop.append(time.perf_counter())
    return execute(sql, params, many, context)


began = time.perf_counter()
with connection.execute_wrapper(note_drop):
    dropped = bars_purge(now_ms=now)
took = time.perf_counter() - began
print("BENCH-DROP " + json.dumps({{"rows": rows, "bytes": size, "seconds": took, "dropped": dropped,
                                  "detached": first_drop[0] - began, "synthesis": synthesis}}))
"""


def _python(code: str, env: dict, marker: str) -> dict:
    import json

    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=1800)
    for line in result.stdout.splitlines():
        if line.startswith(marker + " "):
            return json.loads(line[len(marker) + 1:])
    raise RuntimeError((result.stderr or result.stdout)[-2000:])


def measure_sizes(database_url: str) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "LOG_LEVEL": "WARNING", "REDIS_URL": "", "INGESTION_MAX_WINDOW_MS": "20000"}
    return _python(MEASURE.format(root=str(ROOT), recordings_map=RECORDINGS, copies=COPIES), env, "BENCH-SIZES")


def measure_multi_pair(database_url: str, pairs: int = 100, ticks: int = 30) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "LOG_LEVEL": "WARNING", "REDIS_URL": ""}
    return _python(MULTI_PAIR.format(root=str(ROOT), pairs=pairs, ticks=ticks), env, "BENCH-MULTI")


def measure_partition_drop(database_url: str, pairs: int = 200) -> dict:
    """A day of `pairs` pairs' second bars (86,400 x pairs, packed by the minute as the store
    keeps a closed day) synthesised ten days back, then the retention purge (7 days) that
    drops it, timed: in all, and up to the first detached partition's drop (the part that
    holds the bar tables' locks)."""
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "LOG_LEVEL": "WARNING", "REDIS_URL": "", "RETENTION_SECOND_BARS_DAYS": "7",
           "RETENTION_MINUTE_BARS_DAYS": "90"}
    return _python(DROP_DAY.format(root=str(ROOT), pairs=pairs), env, "BENCH-DROP")


def run() -> list[dict]:
    admin = os.environ.get("BENCH_DATABASE_URL")
    if not admin:
        return [{"figure": "stored bar size", "value": "skipped", "comparison": "needs BENCH_DATABASE_URL (PostgreSQL)",
                 "goal": "", "met": None}]
    url, drop = _database(admin)
    try:
        sizes = measure_sizes(url)
        multi = measure_multi_pair(url)
        dropped = None if os.environ.get("BENCH_SKIP_DROP") else measure_partition_drop(
            url, pairs=int(os.environ.get("BENCH_DROP_PAIRS", "200")))
    finally:
        drop()
    rows = []
    packed, read = sizes.pop("second, packed tier"), sizes.pop("read")
    for granularity, size in sizes.items():
        if not size["rows"] or granularity in ("hour", "day"):  # a hundred rows: pages, not rows, would count
            continue
        per_row = (size["heap"] + size["indexes"]) / size["rows"]
        if granularity == "second":
            bars = size["rows"] + packed["rows"]
            total = (size["heap"] + size["indexes"] + packed["heap"] + packed["indexes"]) / bars
            per_packed = (packed["heap"] + packed["indexes"]) / packed["rows"]
            rows.append({
                "figure": "stored second bar, both tiers, with their indexes and TOAST (real BTCUSDT + ETHUSDT "
                          "recordings, ingested)",
                "value": f"{total:.0f} B",
                "comparison": f"packed tier {per_packed:.0f} B a bar ({packed['rows']} bars in {packed['packs']} "
                              f"packs; zstd data {packed['values'] / packed['rows']:.0f} B, table + TOAST "
                              f"{packed['heap'] / packed['rows']:.0f} B, index {packed['indexes'] / packed['rows']:.1f}"
                              f" B); row tier (open minutes) {per_row:.0f} B a bar ({size['rows']} rows)",
                "goal": f"<= {GOAL_BYTES} B", "met": total <= GOAL_BYTES})
            rows.append({
                "figure": "reading a pair's second bars, every field (bars_range), per bar",
                "value": f"{read['both tiers'] * 1e6:.1f} us",
                "comparison": f"the same {read['rows']} bars all as rows: {read['rows only'] * 1e6:.1f} us; "
                              f"decoding packs alone {read['decode only'] * 1e6:.1f} us",
                "goal": "", "met": None})
            continue
        rows.append({
            "figure": f"stored {granularity} bar, with its indexes (real BTCUSDT + ETHUSDT recordings)",
            "value": f"{per_row:.0f} B",
            "comparison": f"heap {size['heap'] / size['rows']:.0f} B + indexes {size['indexes'] / size['rows']:.0f} B "
                          f"({size['indexes_rebuilt'] / size['rows']:.0f} B rebuilt), {size['rows']} rows",
            "goal": "", "met": None,
        })
    rows.append({
        "figure": "second bars of one tick, 100 pairs x 1 bar, written together (bars_write_many), per bar",
        "value": f"{multi['together'] * 1e6:.0f} us",
        "comparison": f"one bars_write per pair: {multi['per_pair'] * 1e6:.0f} us per bar "
                      f"({multi['per_pair'] / multi['together']:.1f}x); the tick that closes a minute, packing "
                      f"it for every pair: {multi['packing'] * 1e6:.0f} us per bar",
        "goal": "", "met": None,
    })
    if dropped is None:
        return rows
    rows.append({
        "figure": f"retention: dropping a day of {dropped['rows'] // 86_400} pairs' second bars "
                  f"({dropped['rows']:,} bars in minute packs, {dropped['bytes'] / 2**30:.2f} GiB)",
        "value": f"{dropped['seconds'] * 1000:.0f} ms",
        "comparison": f"bars_purge, the day's two partitions (rows, packs), no row deleted: detached (gone from "
                      f"every read, the tables' locks held) in {dropped['detached'] * 1000:.0f} ms, then their "
                      f"files freed",
        "goal": "< 1 s", "met": dropped["seconds"] < 1.0,
    })
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
