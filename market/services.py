"""Functions that write the catalog and the bar store."""

from __future__ import annotations

import json
import logging
import operator
import os
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db import connection, models, transaction

from config.db import Float8Array, Int8Array, execute_prepared, fetch_prepared

from .bars import BAR_FIELDS, GRANULARITY_MS, Bar, floor_ms, merge
from .models import BAR_MODELS, Asset, Exchange, Pair
from .partitions import partitioned, partitions_ahead, partitions_drop_before, partitions_ensure

logger = logging.getLogger(__name__)

ROLL_UPS = (("second", "minute"), ("minute", "hour"), ("hour", "day"))


_bar_values = operator.attrgetter(*BAR_FIELDS)
_UPSERT_SQL: dict[tuple[str, str], str] = {}


def _upsert_sql(model) -> str:
    """The upsert of a bar table's rows: in PostgreSQL one statement for any number of rows,
    each column an array (`unnest`), prepared once per connection; in SQLite one row's."""
    key = (connection.vendor, model._meta.db_table)
    if key not in _UPSERT_SQL:
        quote = connection.ops.quote_name
        fields = [model._meta.get_field("pair")] + [model._meta.get_field(name) for name in BAR_FIELDS]
        names = ", ".join(quote(f.column) for f in fields)
        updates = ", ".join(f"{quote(f.column)} = EXCLUDED.{quote(f.column)}" for f in fields[2:])
        conflict = f"ON CONFLICT ({quote(fields[0].column)}, {quote(fields[1].column)}) DO UPDATE SET {updates}"
        if connection.vendor == "postgresql":
            arrays = ", ".join(f"%b::{f.rel_db_type(connection) if f.is_relation else f.db_type(connection)}[]"
                               for f in fields)
            source = f"SELECT * FROM unnest({arrays})"
        else:
            source = f"VALUES ({', '.join(['%s'] * len(fields))})"
        _UPSERT_SQL[key] = f"INSERT INTO {quote(model._meta.db_table)} ({names}) {source} {conflict}"
    return _UPSERT_SQL[key]


_ARRAY_TYPES: dict[str, list[type]] = {}


def _array_types(model) -> list[type]:
    """The array each column of `_upsert_sql` is sent as (its SQL casts it to the column's type)."""
    types = _ARRAY_TYPES.get(model._meta.db_table)
    if types is None:
        fields = [model._meta.get_field("pair")] + [model._meta.get_field(name) for name in BAR_FIELDS]
        types = _ARRAY_TYPES[model._meta.db_table] = [
            Float8Array if isinstance(f, models.FloatField) else Int8Array for f in fields]
    return types


def _upsert(granularity: str, bars_by_pair: list[tuple[Pair, list[Bar]]]) -> None:
    """One upsert of every pair's bars (after making the partitions they fall in). Written
    without model instances: preparing 26 values a row through the fields was a third of
    a tick's write."""
    model = BAR_MODELS[granularity]
    rows = [(pair.pk, *_bar_values(bar)) for pair, bars in bars_by_pair for bar in bars]
    if not rows:
        return
    partitions_ensure(model, {row[1] for row in rows})
    if connection.vendor == "postgresql":
        execute_prepared(_upsert_sql(model), [array(column) for array, column in zip(_array_types(model), zip(*rows))])
    else:
        with connection.cursor() as cursor:
            cursor.executemany(_upsert_sql(model), rows)


def _parent_span(parent: str, from_ms: int, to_ms: int) -> tuple[int, int]:
    return floor_ms(from_ms, parent), floor_ms(to_ms - 1, parent) + GRANULARITY_MS[parent]


_CHILDREN_SQL: dict[tuple[str, str, int], str] = {}


def _children_sql(model, spans: int) -> str:
    """The stored bars of some pairs in some ranges: `spans` times (pair ids, from, to)."""
    key = (connection.vendor, model._meta.db_table, spans)
    if key not in _CHILDREN_SQL:
        quote = connection.ops.quote_name
        names = ", ".join(quote(model._meta.get_field(name).column) for name in BAR_FIELDS)
        # SQLite has no arrays: its pair ids go in as a JSON list
        pairs = ("pair_id = ANY(%s)" if connection.vendor == "postgresql"
                 else "pair_id IN (SELECT value FROM json_each(%s))")
        where = " OR ".join([f"({pairs} AND ts_ms >= %s AND ts_ms < %s)"] * spans)
        _CHILDREN_SQL[key] = (f"SELECT pair_id, {names} FROM {quote(model._meta.db_table)} WHERE {where} "
                              "ORDER BY pair_id, ts_ms")
    return _CHILDREN_SQL[key]


def _roll_up(child: str, parent: str, spans: dict[int, tuple[Pair, int, int]]) -> dict[int, tuple[Pair, int, int]]:
    """Recompute the parent bars covering each pair's [from_ms, to_ms) (spans: pair id ->
    (pair, from_ms, to_ms)) from their stored children, read in one query for all pairs.
    Recomputing (not adding) keeps roll-ups exact when a child is written twice. Returns
    the parent spans written, for the next roll-up."""
    parent_spans = {pk: (pair, *_parent_span(parent, lo, hi)) for pk, (pair, lo, hi) in spans.items()}
    pairs_by_span: dict[tuple[int, int], list[int]] = defaultdict(list)  # a tick's pairs share their spans
    for pk, (_, start, end) in parent_spans.items():
        pairs_by_span[start, end].append(pk)
    params = []
    for (start, end), pks in pairs_by_span.items():
        params += [pks if connection.vendor == "postgresql" else json.dumps(pks), start, end]
    groups: dict[int, dict[int, list[Bar]]] = defaultdict(lambda: defaultdict(list))
    for pair_id, *values in fetch_prepared(_children_sql(BAR_MODELS[child], len(pairs_by_span)), params):
        bar = Bar(*values)
        groups[pair_id][floor_ms(bar.ts_ms, parent)].append(bar)
    _upsert(parent, [(parent_spans[pk][0], [merge(children, ts) for ts, children in sorted(by_ts.items())])
                     for pk, by_ts in groups.items()])
    return parent_spans


def bars_write_many(*, granularity: str, bars_by_pair: list[tuple[Pair, list[Bar]]]) -> None:
    """Upsert the bars of many pairs (one granularity, each pair's bars in time order, each
    pair once), then recompute every coarser bar they fall in: one multi-row upsert per
    table and one read per roll-up for all the pairs together. Runs inside the caller's
    transaction when there is one (ingestion), so the bars and the source cursors commit
    together."""
    bars_by_pair = [(pair, bars) for pair, bars in bars_by_pair if bars]
    if not bars_by_pair:
        return
    step = GRANULARITY_MS[granularity]
    with transaction.atomic():
        _upsert(granularity, bars_by_pair)
        spans = {pair.pk: (pair, bars[0].ts_ms, bars[-1].ts_ms + step) for pair, bars in bars_by_pair}
        for child, parent in ROLL_UPS:
            if GRANULARITY_MS[child] >= step:
                spans = _roll_up(child, parent, spans)


def bars_write(*, pair: Pair, granularity: str, bars: list[Bar]) -> None:
    """Upsert one pair's bars of one granularity and recompute every coarser bar they fall
    in: bars_write_many for one pair."""
    bars_write_many(granularity=granularity, bars_by_pair=[(pair, bars)])


def bars_purge(*, now_ms: int) -> dict[str, int]:
    """Remove bars older than their granularity's retention (settings.BAR_RETENTION_DAYS).
    In PostgreSQL whole partitions go (a partition goes once all of it is past the
    retention; no row is deleted) and the count is of partitions dropped; in SQLite rows
    are deleted and counted."""
    removed = {}
    for granularity, days in settings.BAR_RETENTION_DAYS.items():
        if days:
            model, cutoff = BAR_MODELS[granularity], now_ms - days * 86_400_000
            if partitioned():
                removed[granularity] = len(partitions_drop_before(model, cutoff_ms=cutoff, now_ms=now_ms))
            else:
                removed[granularity], _ = model.objects.filter(ts_ms__lt=cutoff).delete()
    return removed


def bar_partitions_upkeep(*, now_ms: int) -> None:
    """Make the bar partitions of today and the next days ahead of the writes (beat)."""
    for model in BAR_MODELS.values():
        partitions_ahead(model, now_ms=now_ms)


# -- catalog ---------------------------------------------------------------------------

DEMO_EXCHANGES = {
    "binance": ("Binance", ["BTC/USDT", "ETH/USDT", "SOL/USDT", "XRP/USDT", "BNB/USDT", "DOGE/USDT", "ADA/USDT",
                            "ETH/BTC"]),
    "coinbase": ("Coinbase", ["BTC/USD", "ETH/USD", "SOL/USD", "XRP/USD", "DOGE/USD", "USDT/USD"]),
    "kraken": ("Kraken", ["BTC/USD", "ETH/USD", "BTC/EUR", "XRP/EUR", "SOL/EUR", "ADA/USD"]),
}
FIAT = {"USD": "US Dollar", "EUR": "Euro"}
RANKINGS_FILE = Path(__file__).resolve().parent / "data" / "rankings.json"


def asset_ensure(symbol: str, name: str = "") -> Asset:
    asset, created = Asset.objects.get_or_create(symbol=symbol.upper(), defaults={"name": name})
    if name and not asset.name:
        asset.name = name
        asset.save(update_fields=["name"])
    return asset


@transaction.atomic
def catalog_seed_demo() -> list[Pair]:
    """The demo catalog of API.md: three exchanges fed by the simulator. Idempotent."""
    if RANKINGS_FILE.exists():
        rankings_apply(*_file_rankings())
    for symbol, name in FIAT.items():
        asset_ensure(symbol, name)
    pairs = []
    for slug, (name, symbols) in DEMO_EXCHANGES.items():
        exchange, _ = Exchange.objects.get_or_create(slug=slug, defaults={"name": name})
        for text in symbols:
            base, quote = text.split("/")
            pair, _ = Pair.objects.get_or_create(exchange=exchange, base=asset_ensure(base),
                                                 quote=asset_ensure(quote))
            pairs.append(pair)
    return pairs


def _file_rankings():
    from .ranking import FileRankingProvider

    return FileRankingProvider(RANKINGS_FILE).fetch()


@transaction.atomic
def rankings_apply(as_of: datetime, tokens) -> int:
    """Store a ranking: every listed asset gets its rank, market cap and supply; assets no
    longer listed lose their rank."""
    seen = set()
    for token in tokens:
        asset = asset_ensure(token.symbol, token.name)
        asset.market_cap_rank = token.rank
        asset.market_cap_usd = token.market_cap_usd
        asset.circulating_supply = token.circulating_supply
        asset.ranked_at = as_of
        asset.save(update_fields=["market_cap_rank", "market_cap_usd", "circulating_supply", "ranked_at"])
        seen.add(asset.pk)
    Asset.objects.exclude(pk__in=seen).update(market_cap_rank=None)
    return len(seen)


def rankings_refresh() -> int:
    """Fetch the ranking from the configured provider and store it."""
    from .ranking import CoinGeckoRankingProvider, FileRankingProvider

    if settings.RANKING_PROVIDER == "coingecko":
        provider = CoinGeckoRankingProvider(api_key=settings.COINGECKO_API_KEY or None)
    else:
        provider = FileRankingProvider(settings.RANKING_FILE or RANKINGS_FILE)
    as_of, tokens = provider.fetch()
    return rankings_apply(as_of, tokens)


def _synthesize_hours(job: tuple) -> tuple[int, list[Bar]]:
    pair_id, exchange, base, quote, seed, start_ms, end_ms = job
    from .sources.events import PairRef
    from .sources.simulator import SimulatorSource

    return pair_id, SimulatorSource(seed=seed).synthesize_bars(PairRef(exchange, base, quote), start_ms, end_ms, "hour")


def history_seed(*, pairs: list[Pair], days: int, now_ms: int, seed: int = 0) -> int:
    """Hourly (and so daily) history for simulated pairs, filling only the hours not stored
    yet, so running it again each day adds just the new hours. Returns bars written."""
    from concurrent.futures import ProcessPoolExecutor

    from django.db.models import Max

    from .models import HourBar

    end = floor_ms(now_ms, "hour")
    jobs = []
    for pair in pairs:
        if pair.exchange.source != Exchange.Source.SIMULATOR:
            continue
        last = HourBar.objects.filter(pair=pair).aggregate(last=Max("ts_ms"))["last"]
        start = max(end - days * GRANULARITY_MS["day"], (last + GRANULARITY_MS["hour"]) if last else 0)
        if start < end:
            jobs.append((pair.pk, pair.exchange.slug, pair.base.symbol, pair.quote.symbol, seed, start, end))
    if not jobs:
        return 0
    by_id = {pair.pk: pair for pair in pairs}
    written = 0
    with ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
        for pair_id, bars in pool.map(_synthesize_hours, jobs):
            bars_write(pair=by_id[pair_id], granularity="hour", bars=bars)
            written += len(bars)
    return written


# -- synthetic history at scale -----------------------------------------------------------

SYNTHETIC_EXCHANGE = "synthetic"
SYNTHETIC_QUOTE = "USDT"


def synthetic_pairs_ensure(*, count: int, seed: int) -> list[tuple[Pair, "object"]]:
    """The catalog of a synthetic history: `count` pairs SYN001-USDT ... on the exchange
    "synthetic" (fed by the simulator if ever subscribed), each with the tick and amount
    increment of its profile (market/synthesis.py). Idempotent."""
    from . import synthesis

    exchange, _ = Exchange.objects.get_or_create(slug=SYNTHETIC_EXCHANGE, defaults={"name": "Synthetic history"})
    quote = asset_ensure(SYNTHETIC_QUOTE, "Tether")
    out = []
    for index in range(count):
        prof = synthesis.profile(seed=seed, index=index)
        base = asset_ensure(f"SYN{index + 1:03d}", f"Synthetic {index + 1}")
        pair, _ = Pair.objects.update_or_create(exchange=exchange, base=base, quote=quote, defaults={
            "price_increment": Decimal(1).scaleb(-prof.price_decimals),
            "amount_increment": Decimal(1).scaleb(-prof.amount_decimals)})
        out.append((pair, prof))
    return out


def history_synthesize(*, pair: Pair, prof, index: int, seed: int, end_ms: int, second_days: int,
                       hour_days: int) -> dict[str, int]:
    """Write one pair's synthetic history ending at end_ms (a whole hour): second bars for
    the last `second_days` days with their minute and hour roll-ups, hour bars drawn
    directly before them back to `hour_days` days, day bars rolled up from the hours.
    Bars the pair already holds in that range are replaced. PostgreSQL takes them by
    binary COPY of the ORM's bar columns, listed by name (whatever the table's keys);
    other databases by plain inserts (small sizes). Returns bars written per granularity."""
    import numpy as np

    from . import synthesis

    if end_ms % GRANULARITY_MS["hour"]:
        raise ValueError("end_ms must be a whole hour")
    rng = np.random.default_rng([seed, index, 2])
    second_start = end_ms - second_days * GRANULARITY_MS["day"]
    hour_start = min(second_start, end_ms - hour_days * GRANULARITY_MS["day"])
    hours_before, last = synthesis.bars(prof, rng, start_ms=hour_start,
                                        count=(second_start - hour_start) // GRANULARITY_MS["hour"],
                                        step_ms=GRANULARITY_MS["hour"], first_price=prof.price)
    seconds, _ = synthesis.bars(prof, rng, start_ms=second_start, count=(end_ms - second_start) // 1000,
                                step_ms=1000, first_price=last)
    hours = synthesis.concatenate(hours_before, synthesis.roll_up(seconds, GRANULARITY_MS["hour"]))
    tables = {"second": seconds, "minute": synthesis.roll_up(seconds, GRANULARITY_MS["minute"]), "hour": hours,
              "day": synthesis.roll_up(hours, GRANULARITY_MS["day"])}
    day_start = floor_ms(hour_start, "day")
    with transaction.atomic():
        for granularity, columns in tables.items():
            model = BAR_MODELS[granularity]
            start = day_start if granularity == "day" else (
                hour_start if granularity == "hour" else second_start)
            model.objects.filter(pair=pair, ts_ms__gte=start, ts_ms__lt=end_ms).delete()
            _bars_copy(model, pair, columns)
    return {granularity: int(columns["ts_ms"].size) for granularity, columns in tables.items()}


_COPY_CHUNK_ROWS = 100_000


def _bars_copy(model, pair: Pair, columns) -> None:
    """Insert bar columns (market/synthesis.py's arrays) into the model's table by the ORM
    field names: pair, ts_ms and the other Bar fields."""
    from django.db import connection

    from . import synthesis

    fields = ["pair", *BAR_FIELDS]
    names = [model._meta.get_field(name).column for name in fields]
    table = connection.ops.quote_name(model._meta.db_table)
    column_list = ", ".join(connection.ops.quote_name(name) for name in names)
    size = int(columns["ts_ms"].size)
    if size:  # the partitions the rows fall in, made first (COPY into a missing one fails)
        ts = columns["ts_ms"]
        partitions_ensure(model, {int(day) for day in set((ts - ts % GRANULARITY_MS["day"]).tolist())})
    data = {model._meta.get_field(name).column: columns[name] for name in BAR_FIELDS}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                           "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                           [model._meta.db_table])
            stored = dict(cursor.fetchall())
            types = [stored[name] for name in names]
            if all(kind in synthesis.BINARY_TYPES for kind in types):
                with cursor.copy(f"COPY {table} ({column_list}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.write(synthesis.COPY_SIGNATURE)
                    for at in range(0, size, _COPY_CHUNK_ROWS):
                        chunk = {name: values[at:at + _COPY_CHUNK_ROWS] for name, values in data.items()}
                        copy.write(synthesis.copy_rows(chunk, names, types, {names[0]: pair.pk}))
                    copy.write(synthesis.COPY_TRAILER)
                return
        rows = _rows_of(data, names[1:], pair.pk)
        if connection.vendor == "postgresql":  # a column type the binary path does not know: psycopg adapts
            with cursor.copy(f"COPY {table} ({column_list}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(names))
            cursor.executemany(f"INSERT INTO {table} ({column_list}) VALUES ({placeholders})", list(rows))


def _rows_of(data, names, pair_id):
    lists = [[None if value != value else value for value in data[name].tolist()] for name in names]
    for values in zip(*lists):
        yield (pair_id, *values)
