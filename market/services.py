"""Functions that write the catalog and the bar store."""

from __future__ import annotations

import json
import logging
import operator
import os
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.db import connection, models, transaction

from config.db import Float8Array, Int8Array, execute_prepared, fetch_prepared

from . import bar_pack
from .bars import BAR_FIELDS, GRANULARITY_MS, Bar, floor_ms, merge
from .models import BAR_MODELS, Asset, Exchange, Pair, SecondBarPack
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
    """The stored bars of some pairs in some ranges: `spans` times (pair ids, from, to).
    Second bars are read from both tiers (rows, then packs: `_second_children`), with the
    pack's seconds and data last (None for a row); their rows from one minute earlier than
    the range (a second parameter triple per span), so a minute the last tick left open and
    this one closed is found and packed."""
    key = (connection.vendor, model._meta.db_table, spans)
    if key not in _CHILDREN_SQL:
        quote = connection.ops.quote_name
        names = ", ".join(quote(model._meta.get_field(name).column) for name in BAR_FIELDS)
        # SQLite has no arrays: its pair ids go in as a JSON list
        pairs = ("pair_id = ANY(%s)" if connection.vendor == "postgresql"
                 else "pair_id IN (SELECT value FROM json_each(%s))")
        where = " OR ".join([f"({pairs} AND ts_ms >= %s AND ts_ms < %s)"] * spans)
        sql = f"SELECT pair_id, {names} FROM {quote(model._meta.db_table)} WHERE {where}"
        if model is BAR_MODELS["second"]:
            sql = (f"SELECT pair_id, {names}, NULL AS seconds, NULL AS data FROM {quote(model._meta.db_table)} "
                   f"WHERE {where} UNION ALL SELECT pair_id, minute_ts_ms, {', '.join(['NULL'] * (len(BAR_FIELDS) - 1))}, "
                   f"seconds, data FROM {quote(SecondBarPack._meta.db_table)} "
                   f"WHERE {where.replace('ts_ms', 'minute_ts_ms')}")
        _CHILDREN_SQL[key] = f"{sql} ORDER BY pair_id, ts_ms"
    return _CHILDREN_SQL[key]


def _roll_up(child: str, parent: str, spans: dict[int, tuple[Pair, int, int]]
             ) -> tuple[dict[int, tuple[Pair, int, int]], dict[int, dict[int, list[Bar]]]]:
    """Recompute the parent bars covering each pair's [from_ms, to_ms) (spans: pair id ->
    (pair, from_ms, to_ms)) from their stored children, read in one query for all pairs.
    Recomputing (not adding) keeps roll-ups exact when a child is written twice. Returns
    the parent spans written, for the next roll-up, and the children merged (pair id ->
    parent start -> children in time order)."""
    parent_spans = {pk: (pair, *_parent_span(parent, lo, hi)) for pk, (pair, lo, hi) in spans.items()}
    pairs_by_span: dict[tuple[int, int], list[int]] = defaultdict(list)  # a tick's pairs share their spans
    for pk, (_, start, end) in parent_spans.items():
        pairs_by_span[start, end].append(pk)
    params, row_params = [], []
    for (start, end), pks in pairs_by_span.items():
        ids = pks if connection.vendor == "postgresql" else json.dumps(pks)
        params += [ids, start, end]
        row_params += [ids, start - GRANULARITY_MS["minute"], end]
    groups: dict[int, dict[int, list[Bar]]] = defaultdict(lambda: defaultdict(list))
    if child == "second":
        rows = fetch_prepared(_children_sql(BAR_MODELS[child], len(pairs_by_span)), row_params + params)
        groups = _second_children(rows, spans, parent_spans)
    else:
        for pair_id, *values in fetch_prepared(_children_sql(BAR_MODELS[child], len(pairs_by_span)), params):
            bar = Bar(*values)
            groups[pair_id][floor_ms(bar.ts_ms, parent)].append(bar)
    _upsert(parent, [(parent_spans[pk][0], [merge(children, ts) for ts, children in sorted(by_ts.items())])
                     for pk, by_ts in groups.items()])
    return parent_spans, groups


def _second_children(rows, spans, parent_spans) -> dict[int, dict[int, list[Bar]]]:
    """The second bars of each pair's minutes (pair id -> minute -> bars) from a read of
    both tiers, packing on the way every minute the written seconds passed the end of (and
    re-packing a packed one a second was written into): one insert of the packs and one
    delete of their rows for all pairs, in the caller's transaction, so any statement
    reading second bars sees each second once, either as a row or in a pack."""
    hot: dict[int, dict[int, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    packs: dict[int, dict[int, tuple[int, bytes]]] = defaultdict(dict)
    for pair_id, *values, seconds, data in rows:
        if data is None:
            hot[pair_id][bar_pack.minute_of(values[0])].append(tuple(values))
        else:
            packs[pair_id][values[0]] = (seconds, data)
    groups: dict[int, dict[int, list[Bar]]] = defaultdict(dict)
    packing = []
    for pair_id in hot.keys() | packs.keys():
        written_to = spans[pair_id][2]  # the end of the last second written
        start = parent_spans[pair_id][1]
        for minute in sorted(hot[pair_id].keys() | packs[pair_id].keys()):
            stored, pack = hot[pair_id].get(minute), packs[pair_id].get(minute)
            if pack is None:
                bars = stored
            else:
                bars = bar_pack.decode(minute, *pack)
                if stored:  # written into a packed minute: the rows win, the minute is packed again
                    by_ts = {bar[0]: bar for bar in bars}
                    by_ts.update((bar[0], bar) for bar in stored)
                    bars = [by_ts[ts] for ts in sorted(by_ts)]
            if stored and (pack is not None or written_to >= minute + bar_pack.MINUTE_MS + GRANULARITY_MS["second"]):
                packing.append((pair_id, minute, *bar_pack.encode(minute, bars)))
            if minute >= start:  # the minute before the range was read only to be packed
                groups[pair_id][minute] = [Bar(*bar) for bar in bars]
    if packing:
        _packs_store(packing)
    return groups


_PACK_SQL: dict[str, tuple[str, str]] = {}


def _pack_sql() -> tuple[str, str]:
    """The upsert of packs and the delete of their minutes' rows (in PostgreSQL each one
    statement for any number of minutes, each column an array)."""
    if connection.vendor not in _PACK_SQL:
        quote = connection.ops.quote_name
        packs, rows = quote(SecondBarPack._meta.db_table), quote(BAR_MODELS["second"]._meta.db_table)
        conflict = ("ON CONFLICT (pair_id, minute_ts_ms) DO UPDATE SET seconds = EXCLUDED.seconds, "
                    "data = EXCLUDED.data")
        if connection.vendor == "postgresql":
            _PACK_SQL[connection.vendor] = (
                f"INSERT INTO {packs} (pair_id, minute_ts_ms, seconds, data) "
                f"SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::bigint[], %b::bytea[]) {conflict}",
                f"DELETE FROM {rows} AS r USING unnest(%b::bigint[], %b::bigint[]) AS m(pair_id, minute) "
                f"WHERE r.pair_id = m.pair_id AND r.ts_ms >= m.minute AND r.ts_ms < m.minute + "
                f"{bar_pack.MINUTE_MS}")
        else:
            _PACK_SQL[connection.vendor] = (
                f"INSERT INTO {packs} (pair_id, minute_ts_ms, seconds, data) VALUES (%s, %s, %s, %s) {conflict}",
                f"DELETE FROM {rows} WHERE pair_id = %s AND ts_ms >= %s AND ts_ms < %s + {bar_pack.MINUTE_MS}")
    return _PACK_SQL[connection.vendor]


def _packs_store(packing: list[tuple[int, int, int, bytes]]) -> None:
    """Store packs (pair id, minute, seconds, data), replacing any of the same minute, and
    delete the rows of their minutes."""
    insert, delete = _pack_sql()
    partitions_ensure(SecondBarPack, {minute for _, minute, _, _ in packing})
    if connection.vendor == "postgresql":
        pair_ids, minutes, seconds, data = zip(*packing)
        execute_prepared(insert, [Int8Array(pair_ids), Int8Array(minutes), Int8Array(seconds), list(data)])
        execute_prepared(delete, [Int8Array(pair_ids), Int8Array(minutes)])
    else:
        with connection.cursor() as cursor:
            cursor.executemany(insert, packing)
            cursor.executemany(delete, [(pair_id, minute, minute) for pair_id, minute, _, _ in packing])


@dataclass(frozen=True)
class RollUpMemo:
    """What a write of a pair's second bars left in its open minute, hour and day, for the
    next write of the seconds that follow in the same minute: those are folded into it rather
    than the minute's, hour's and day's children being read back. `merge` is a left fold, so
    merge([merge(a), *b]) is merge(a + b) to the bit: the bars are the ones the read gives.

    through_ms: the end of the last second written; minute: the open minute's bar (every
    second written in it folded); hour_before / day_before: the open hour's complete minutes
    and the open day's complete hours folded (their starts as ts_ms)."""

    through_ms: int
    minute: Bar
    hour_before: Bar
    day_before: Bar

    def continues(self, bars: list[Bar]) -> bool:
        """The bars start where the memo ends and stay in its minute (a tick that reaches the
        next minute packs the one it closed: the read serves it)."""
        return bars[0].ts_ms == self.through_ms and bars[-1].ts_ms < self.minute.ts_ms + GRANULARITY_MS["minute"]


def bars_write_many(*, granularity: str, bars_by_pair: list[tuple[Pair, list[Bar]]],
                    memos: dict[int, RollUpMemo | None] | None = None) -> dict[int, RollUpMemo]:
    """Upsert the bars of many pairs (one granularity, each pair's bars in time order, each
    pair once), then recompute every coarser bar they fall in: one multi-row upsert per
    table and one read per roll-up for all the pairs together. Runs inside the caller's
    transaction when there is one (ingestion), so the bars and the source cursors commit
    together.

    With `memos` (second bars; pair id -> the memo its last write returned, or None) a pair
    whose memo the bars continue is rolled up from the memo, without the reads; the others
    are read as above. Returns each pair's memo for its next write: the caller keeps one only
    once this write commits, and only while nothing else writes the pair's seconds."""
    bars_by_pair = [(pair, bars) for pair, bars in bars_by_pair if bars]
    if not bars_by_pair:
        return {}
    step = GRANULARITY_MS[granularity]
    folded, read = [], bars_by_pair
    if memos is not None and granularity == "second":
        folded = [(pair, bars, memos[pair.pk]) for pair, bars in bars_by_pair
                  if memos.get(pair.pk) is not None and memos[pair.pk].continues(bars)]
        continuing = {pair.pk for pair, _, _ in folded}
        read = [(pair, bars) for pair, bars in bars_by_pair if pair.pk not in continuing]
    with transaction.atomic():
        _upsert(granularity, bars_by_pair)
        out = _roll_up_folded(folded)
        if read:
            spans = {pair.pk: (pair, bars[0].ts_ms, bars[-1].ts_ms + step) for pair, bars in read}
            children = {}
            for child, parent in ROLL_UPS:
                if GRANULARITY_MS[child] >= step:
                    spans, children[parent] = _roll_up(child, parent, spans)
            if memos is not None and granularity == "second":
                out.update(_memos_read(read, children))
    return out


def _roll_up_folded(folded: list[tuple[Pair, list[Bar], RollUpMemo]]) -> dict[int, RollUpMemo]:
    """The open minute, hour and day of each pair from its memo and its new seconds, upserted."""
    if not folded:
        return {}
    out, minutes, hours, days = {}, [], [], []
    for pair, bars, memo in folded:
        minute = merge([memo.minute, *bars], memo.minute.ts_ms)
        hour = merge([memo.hour_before, minute], memo.hour_before.ts_ms)
        day = merge([memo.day_before, hour], memo.day_before.ts_ms)
        minutes.append((pair, [minute]))
        hours.append((pair, [hour]))
        days.append((pair, [day]))
        out[pair.pk] = RollUpMemo(bars[-1].ts_ms + GRANULARITY_MS["second"], minute, memo.hour_before, memo.day_before)
    for granularity, parents in (("minute", minutes), ("hour", hours), ("day", days)):
        _upsert(granularity, parents)
    return out


def _memos_read(read: list[tuple[Pair, list[Bar]]], children: dict[str, dict[int, dict[int, list[Bar]]]]
                ) -> dict[int, RollUpMemo]:
    """Memos from what the roll-ups read: for each pair whose last bar is the last stored
    second of its minute (nothing written after it), the minute's seconds, the hour's minutes
    before it and the day's hours before that, folded."""
    out = {}
    for pair, bars in read:
        last = bars[-1].ts_ms
        minute_ts, hour_ts, day_ts = floor_ms(last, "minute"), floor_ms(last, "hour"), floor_ms(last, "day")
        seconds = children["minute"].get(pair.pk, {}).get(minute_ts)
        minutes = children["hour"].get(pair.pk, {}).get(hour_ts)
        hours = children["day"].get(pair.pk, {}).get(day_ts)
        if not seconds or seconds[-1].ts_ms != last or not minutes or minutes[-1].ts_ms != minute_ts \
                or not hours or hours[-1].ts_ms != hour_ts:
            continue
        out[pair.pk] = RollUpMemo(last + GRANULARITY_MS["second"], merge(seconds, minute_ts),
                                  merge(minutes[:-1], hour_ts), merge(hours[:-1], day_ts))
    return out


def bars_write(*, pair: Pair, granularity: str, bars: list[Bar]) -> None:
    """Upsert one pair's bars of one granularity and recompute every coarser bar they fall
    in: bars_write_many for one pair."""
    bars_write_many(granularity=granularity, bars_by_pair=[(pair, bars)])


def bars_purge(*, now_ms: int) -> dict[str, int]:
    """Remove bars older than their granularity's retention (settings.BAR_RETENTION_DAYS).
    In PostgreSQL whole partitions go (a partition goes once all of it is past the
    retention; no row is deleted) and the count is of spans dropped (a day of second bars:
    its rows' partition and its packs'); in SQLite rows are deleted and bars counted, a pack going once all
    its minute is past the retention."""
    removed = {}
    for granularity, days in settings.BAR_RETENTION_DAYS.items():
        if days:
            model, cutoff = BAR_MODELS[granularity], now_ms - days * 86_400_000
            tables = [model, SecondBarPack] if granularity == "second" else [model]
            if partitioned():  # a day of second bars is two partitions, its rows' and its packs': counted once
                dropped = [name for table in tables
                           for name in partitions_drop_before(table, cutoff_ms=cutoff, now_ms=now_ms)]
                removed[granularity] = len({name.rpartition("_p")[2] for name in dropped})
            else:
                removed[granularity], _ = model.objects.filter(ts_ms__lt=cutoff).delete()
                if granularity == "second":
                    old = SecondBarPack.objects.filter(minute_ts_ms__lte=cutoff - bar_pack.MINUTE_MS)
                    removed[granularity] += sum(mask.bit_count() for mask in old.values_list("seconds", flat=True))
                    old.delete()
    return removed


def bar_partitions_upkeep(*, now_ms: int) -> None:
    """Make the bar partitions of today and the next days ahead of the writes (beat)."""
    for model in (*BAR_MODELS.values(), SecondBarPack):
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
            if granularity == "second":  # closed minutes all: written packed
                SecondBarPack.objects.filter(pair=pair, minute_ts_ms__gte=start, minute_ts_ms__lt=end_ms).delete()
                _packs_copy(pair, columns)
            else:
                _bars_copy(model, pair, columns)
    return {granularity: int(columns["ts_ms"].size) for granularity, columns in tables.items()}


_COPY_CHUNK_ROWS = 100_000


def _packs_copy(pair: Pair, columns) -> None:
    """Insert whole minutes of second bars (market/synthesis.py's arrays) as packs: by
    binary COPY in PostgreSQL, a day of minutes at a time."""
    from . import synthesis

    day = GRANULARITY_MS["day"]
    ts = columns["ts_ms"]
    quote = connection.ops.quote_name
    table = quote(SecondBarPack._meta.db_table)
    for at in range(0, int(ts.size), day // 1000):
        chunk = {name: values[at:at + day // 1000] for name, values in columns.items()}
        minutes, seconds, data = synthesis.minute_packs(chunk)
        if not minutes:
            continue
        partitions_ensure(SecondBarPack, minutes)
        rows = [(pair.pk, minute, mask, blob) for minute, mask, blob in zip(minutes, seconds, data)]
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                with cursor.copy(f"COPY {table} (pair_id, minute_ts_ms, seconds, data) FROM STDIN "
                                 "(FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "int8", "int8", "bytea"])
                    for row in rows:
                        copy.write_row(row)
            else:
                cursor.executemany(f"INSERT INTO {table} (pair_id, minute_ts_ms, seconds, data) "
                                   "VALUES (%s, %s, %s, %s)", rows)


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
