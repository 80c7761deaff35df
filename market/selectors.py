"""Functions that read the catalog and the bar store."""

from __future__ import annotations

from typing import Iterator

from django.db import connection
from django.db.models import QuerySet

from config import clock
from config.db import fetch_prepared, fetch_prepared_on_loop
from config.recent import RecentLookups

from . import bar_pack, series
from .bars import BAR_FIELDS, GRANULARITY_MS, Bar, floor_ms
from .models import BAR_MODELS, Asset, Exchange, Pair, SecondBarPack


# Every API request names a pair or an exchange; building the same three-table query each
# time was a third of a counted request's cost.
_recent = RecentLookups("CATALOG_CACHE_SECONDS")


def pair_get(*, exchange: str, base: str, quote: str) -> Pair | None:
    """The pair behind a path, matched case-insensitively. Shared by the requests of this
    process for up to CATALOG_CACHE_SECONDS: read it, never change it."""
    key = ("pair", exchange.lower(), base.upper(), quote.upper())
    return _recent.get(key, lambda: (
        Pair.objects.select_related("exchange", "base", "quote")
        .filter(exchange__slug=key[1], base__symbol=key[2], quote__symbol=key[3], exchange__is_active=True)
        .first()))


def pair_by_symbol(*, exchange: str, symbol: str, held_only: bool = False) -> Pair | None:
    """The pair of a `BASE-QUOTE` symbol (`pair_get`). held_only: only if this process read
    it within CATALOG_CACHE_SECONDS, else None, with no database read (an answer on the
    event loop)."""
    base, sep, quote = symbol.partition("-")
    if not sep or not base or not quote or "-" in quote:
        return None
    if held_only:
        return _recent.fresh(("pair", exchange.lower(), base.upper(), quote.upper()))
    return pair_get(exchange=exchange, base=base, quote=quote)


def exchange_get(*, slug: str) -> Exchange | None:
    key = ("exchange", slug.lower())
    return _recent.get(key, lambda: Exchange.objects.filter(slug=key[1], is_active=True).first())


def pair_streamable(*, exchange: str, base: str, quote: str) -> Pair | None:
    """The pair behind a path if it can be streamed (subscribed to, snapshotted, followed
    live), else None: the one place that decides "unknown or not streamable"."""
    pair = pair_get(exchange=exchange, base=base, quote=quote)
    return pair if pair is not None and pair.streamable else None


def pairs_streamable() -> QuerySet[Pair]:
    return (Pair.objects.select_related("exchange", "base", "quote")
            .filter(streamable=True, exchange__is_active=True))


def _bars_range_sql(granularity: str, columns: tuple[str, ...]) -> str:
    """The statement of a pair's bars with from <= ts_ms < to, in time order. Second bars
    are read from both tiers in one statement (one snapshot: a minute being packed is seen
    either as rows or as its pack, never both, never neither): the rows, then the packs
    of the minutes overlapping the range, with their minute start as ts_ms, the other
    columns NULL and their seconds and data last (NULL for a row): `_stored` turns them
    into bars. Parameters: `_range_params`."""
    meta = BAR_MODELS[granularity]._meta
    names = ", ".join(connection.ops.quote_name(meta.get_field(name).column) for name in columns)
    sql = (f"SELECT {names}{', NULL AS seconds, NULL AS data' if granularity == 'second' else ''} "
           f"FROM {connection.ops.quote_name(meta.db_table)} WHERE pair_id = %s AND ts_ms >= %s AND ts_ms < %s")
    if granularity == "second":
        packed = ", ".join("minute_ts_ms" if name == "ts_ms" else "NULL" for name in columns)
        sql += (f" UNION ALL SELECT {packed}, seconds, data FROM "
                f"{connection.ops.quote_name(SecondBarPack._meta.db_table)} "
                "WHERE pair_id = %s AND minute_ts_ms >= %s AND minute_ts_ms < %s")
    return sql + " ORDER BY ts_ms"


def _range_params(granularity: str, pair_id: int, from_ms: int, to_ms: int) -> list[int]:
    """The parameters of `_bars_range_sql`: the packs' range reaches back to the minute
    holding from_ms (its start is up to 59.999 s earlier)."""
    params = [pair_id, from_ms, to_ms]
    if granularity == "second":
        params += [pair_id, from_ms - bar_pack.MINUTE_MS + 1, to_ms]
    return params


def _stored(granularity: str, columns: tuple[str, ...], rows: list[tuple], from_ms: int, to_ms: int,
            limit: int | None = None) -> list[tuple]:
    """The bars of a `_bars_range_sql` read as tuples of the columns, second bars' packs
    decoded (market/bar_pack.py): the one place readers turn the packed tier into bars."""
    if granularity != "second":
        return rows
    return bar_pack.merged(rows, columns, from_ms, to_ms, limit)


_BARS_RANGE_SQL: dict[tuple[str, tuple[str, ...]], str] = {}


def _range_sql(granularity: str, columns: tuple[str, ...]) -> str:
    sql = _BARS_RANGE_SQL.get((granularity, columns))
    if sql is None:
        sql = _BARS_RANGE_SQL[granularity, columns] = _bars_range_sql(granularity, columns)
    return sql


def bars_range(*, pair: Pair, granularity: str, from_ms: int, to_ms: int,
               columns: tuple[str, ...] = BAR_FIELDS) -> Iterator[Bar]:
    """Stored bars with from_ms <= ts_ms < to_ms in time order, with the given columns
    (ts_ms among them; the others keep Bar's defaults). Callers bound the range (series
    endpoints cap it), so one plain fetch beats a server-side cursor. The statement is
    written once per bar table and columns: the ORM built the same one on every series
    request, half the request's CPU (docs/BENCHMARKS.md)."""
    rows = _stored(granularity, columns,
                   fetch_prepared(_range_sql(granularity, columns), _range_params(granularity, pair.pk, from_ms, to_ms)),
                   from_ms, to_ms)
    if columns == BAR_FIELDS:
        for row in rows:
            yield Bar(*row)
    else:
        for row in rows:
            yield Bar(**dict(zip(columns, row)))


_BARS_PAGE_SQL: dict[tuple[str, tuple[str, ...]], str] = {}


def _second_page_sql(columns: tuple[str, ...]) -> str:
    """A page of second bars from both tiers in one statement, each tier limited on its own
    (rows: the bars wanted; packs: enough full minutes for them, `_packs_for`), so a page
    never reads and decodes far more packs than it returns. The NULLs are typed: a
    subquery's output has no type to take from the other branch."""
    meta = BAR_MODELS["second"]._meta
    quote = connection.ops.quote_name

    def null(db_type: str) -> str:
        return f"CAST(NULL AS {db_type})"

    names = ", ".join(quote(meta.get_field(name).column) for name in columns)
    packed = ", ".join("minute_ts_ms" if name == "ts_ms" else
                       f"{null(meta.get_field(name).db_type(connection))} AS {quote(name)}" for name in columns)
    blob = SecondBarPack._meta.get_field("data").db_type(connection)
    return (f"SELECT * FROM (SELECT {names}, {null('bigint')} AS seconds, {null(blob)} AS data "
            f"FROM {quote(meta.db_table)} WHERE pair_id = %s AND ts_ms >= %s AND ts_ms < %s ORDER BY ts_ms LIMIT %s) "
            f"AS r UNION ALL SELECT * FROM (SELECT {packed}, seconds, data FROM {quote(SecondBarPack._meta.db_table)} "
            "WHERE pair_id = %s AND minute_ts_ms >= %s AND minute_ts_ms < %s ORDER BY minute_ts_ms LIMIT %s) AS p "
            "ORDER BY ts_ms")


def _packs_for(bars: int) -> int:
    """Packs enough for `bars` bars when minutes are full (one more for a first minute
    mostly before the page); fewer bars come back when they are not, and the page reads on."""
    return bars // 60 + 2


def bars_page(*, pair_id: int, granularity: str, columns: tuple[str, ...], after_ms: int, to_ms: int,
              limit: int) -> list[tuple]:
    """Up to `limit` stored bars with after_ms < ts_ms < to_ms in time order, as tuples of
    the columns (a page of a long read, keyset by ts_ms). Prepared, read in binary. Second
    bars: when a tier's limit was reached, only the bars before its last one are sure to
    be complete; they are kept and the page reads on from there (a short read where packs
    hold sparse minutes)."""
    sql = _BARS_PAGE_SQL.get((granularity, columns))
    if sql is None:
        sql = _BARS_PAGE_SQL[granularity, columns] = (
            _second_page_sql(columns) if granularity == "second" else _range_sql(granularity, columns) + " LIMIT %s")
    if granularity != "second":
        return fetch_prepared(sql, [*_range_params(granularity, pair_id, after_ms + 1, to_ms), limit], binary=True)
    at, out = columns.index("ts_ms"), []
    while len(out) < limit:
        want = limit - len(out)
        rows = fetch_prepared(sql, [pair_id, after_ms + 1, to_ms, want,
                                    pair_id, after_ms + 1 - bar_pack.MINUTE_MS + 1, to_ms, _packs_for(want)],
                              binary=True)
        stored = [row for row in rows if row[-1] is None]
        packed = len(rows) - len(stored)
        complete_to = to_ms  # the bars before it are all in `rows`
        if len(stored) == want:
            complete_to = min(complete_to, stored[-1][at] + 1)
        if packed == _packs_for(want):
            complete_to = min(complete_to, max(row[at] for row in rows if row[-1] is not None) + bar_pack.MINUTE_MS)
        bars = bar_pack.merged([row for row in rows if row[-1] is not None or row[at] < complete_to], columns,
                               after_ms + 1, complete_to, want)
        out += bars
        if complete_to == to_ms:
            break
        after_ms = complete_to - 1
    return out


def second_bar_last_ts(*, pair_id: int) -> int | None:
    """The start of the pair's latest stored second bar, a row or in a pack."""
    from django.db.models import Max

    from .models import SecondBar

    last_row = SecondBar.objects.filter(pair_id=pair_id).aggregate(last=Max("ts_ms"))["last"]
    last_pack = (SecondBarPack.objects.filter(pair_id=pair_id).order_by("-minute_ts_ms")
                 .values_list("minute_ts_ms", "seconds").first())
    last_packed = bar_pack.last_ts(*last_pack) if last_pack else None
    return max((ts for ts in (last_row, last_packed) if ts is not None), default=None)


def second_bars_count(*, pair_id: int, from_ms: int, to_ms: int) -> int:
    """How many second bars the pair holds with from_ms <= ts_ms < to_ms, both tiers, in
    one statement (one snapshot: a minute packed meanwhile is counted once)."""
    quote = connection.ops.quote_name
    sql = (f"SELECT NULL, COUNT(*) FROM {quote(BAR_MODELS['second']._meta.db_table)} "
           "WHERE pair_id = %s AND ts_ms >= %s AND ts_ms < %s UNION ALL "
           f"SELECT minute_ts_ms, seconds FROM {quote(SecondBarPack._meta.db_table)} "
           "WHERE pair_id = %s AND minute_ts_ms >= %s AND minute_ts_ms < %s")
    with connection.cursor() as cursor:
        cursor.execute(sql, [pair_id, from_ms, to_ms, pair_id, from_ms - bar_pack.MINUTE_MS + 1, to_ms])
        rows = cursor.fetchall()
    return sum(count if minute is None else bar_pack.count_between(minute, count, from_ms, to_ms)
               for minute, count in rows)


# A client polling a month of daily candles asks for the same closed bars again and again:
# the fetch and the rows were half of a counted request's server CPU (docs/DECISIONS.md).
# Closed ranges only, of at most HISTORY_CACHE_MAX_BARS bars (92 days of hours, the longest
# hourly request), and at most HISTORY_CACHE_TOTAL_BARS rows kept in all (~0.5 KB each), so
# the memory stays bounded whatever clients ask.
HISTORY_CACHE_MAX_BARS = 92 * 24
HISTORY_CACHE_TOTAL_BARS = 128 * 400
_recent_history = RecentLookups("HISTORY_CACHE_SECONDS", max_entries=HISTORY_CACHE_TOTAL_BARS, size=len)


def _series_statement(pair: Pair, metric: str, granularity: str, from_ms: int, to_ms: int) -> tuple[str, list]:
    """The statement (written once per bar table and metric) and parameters of a series'
    bars: only the metric's columns, in time order."""
    columns = series.METRICS[metric]["columns"]
    return _range_sql(granularity, columns), _range_params(granularity, pair.pk, from_ms, to_ms)


def series_rows(*, pair: Pair, metric: str, granularity: str, resolution: str, from_ms: int, to_ms: int,
                keep: tuple[str, ...] | None = None) -> list[dict]:
    """The rows of a series endpoint for the pair's bars with from_ms <= ts_ms < to_ms. The
    rows of periods that have ended are shared by the requests of this process for up to
    HISTORY_CACHE_SECONDS (a late bar or a correction reaches them within that): read
    them, never change them. The current period's bar is read every time."""
    parts = []
    for statement, key, bounds in _series_parts(pair, metric, granularity, resolution, from_ms, to_ms, keep):
        def load(statement=statement, bounds=bounds) -> list[dict]:
            stored = _stored(granularity, series.METRICS[metric]["columns"],
                             fetch_prepared(*statement, binary=True), *bounds)
            return series.rows(stored, metric, resolution, keep=keep, rounding=pair.rounding)

        parts.append(load() if key is None else _recent_history.get(key, load))
    return _joined(parts)


async def series_rows_on_loop(*, pair: Pair, metric: str, granularity: str, resolution: str, from_ms: int,
                              to_ms: int, keep: tuple[str, ...] | None = None) -> list[dict]:
    """`series_rows` for code on the event loop: the same statements made with psycopg's
    async pool (config.db.fetch_prepared_on_loop, PostgreSQL only), the same rows, kept
    and reused under the same rules."""
    parts = []
    for statement, key, bounds in _series_parts(pair, metric, granularity, resolution, from_ms, to_ms, keep):
        found = None if key is None else _recent_history.fresh(key)
        if found is None:
            stored = _stored(granularity, series.METRICS[metric]["columns"],
                             await fetch_prepared_on_loop(*statement, binary=True), *bounds)
            found = series.rows(stored, metric, resolution, keep=keep, rounding=pair.rounding)
            if key is not None:
                _recent_history.put(key, found)
        parts.append(found)
    return _joined(parts)


def _joined(parts: list[list[dict]]) -> list[dict]:
    """One list of the parts' rows; a single part as it is (a shared answer stays shared)."""
    return parts[0] if len(parts) == 1 else [row for part in parts for row in part]


def _series_parts(pair, metric, granularity, resolution, from_ms, to_ms,
                  keep) -> list[tuple[tuple, tuple | None, tuple[int, int]]]:
    """The reads a series' rows are made of, in time order, each a statement, the key its
    rows are shared under (None: read every time) and its range: the periods that have
    ended (shared, if no more than HISTORY_CACHE_MAX_BARS), then the current period (read
    every time)."""
    ended = max(from_ms, min(to_ms, floor_ms(clock.now_ms(), granularity)))
    parts = []
    if from_ms < ended:
        key = None
        if (ended - from_ms) // GRANULARITY_MS[granularity] <= HISTORY_CACHE_MAX_BARS:
            key = (pair.pk, pair.price_increment, pair.amount_increment, metric, granularity, resolution, from_ms,
                   ended, keep)
        parts.append((_series_statement(pair, metric, granularity, from_ms, ended), key, (from_ms, ended)))
    if ended < to_ms:
        parts.append((_series_statement(pair, metric, granularity, ended, to_ms), None, (ended, to_ms)))
    return parts


def ranked_assets_on(*, exchange: Exchange, n: int) -> list[tuple[Asset, list[str]]]:
    """Top-n assets by market-cap rank that are the base of a pair on the exchange, each
    with its pair symbols there."""
    pairs = (Pair.objects.filter(exchange=exchange, base__market_cap_rank__isnull=False)
             .select_related("base", "quote").order_by("base__market_cap_rank", "quote__symbol"))
    ranked: dict[int, tuple[Asset, list[str]]] = {}
    for pair in pairs:
        entry = ranked.setdefault(pair.base_id, (pair.base, []))
        entry[1].append(pair.symbol)
    return list(ranked.values())[:n]


def pairs_streamable_search(*, exchange: str = "", base: str = "", quote: str = "") -> QuerySet[Pair]:
    """Streamable pairs matching a search, best market-cap rank first (unranked last):
    `exchange` and `quote` exact (any case), `base` a prefix of the symbol or a word of the
    token's name starts with ("bit" finds BTC by Bitcoin; "eth" is not Tether)."""
    from django.db.models import F, Q

    pairs = pairs_streamable()
    if exchange:
        pairs = pairs.filter(exchange__slug=exchange.strip().lower())
    if quote:
        pairs = pairs.filter(quote__symbol=quote.strip().upper())
    if base:
        term = base.strip()
        pairs = pairs.filter(Q(base__symbol__istartswith=term) | Q(base__name__istartswith=term)
                             | Q(base__name__icontains=f" {term}"))
    return pairs.order_by(F("base__market_cap_rank").asc(nulls_last=True), "exchange__slug", "base__symbol",
                          "quote__symbol")


def streamable_choices() -> tuple[list[str], list[str]]:
    """The exchanges and the quote assets of the streamable pairs, for a search form."""
    pairs = pairs_streamable()
    exchanges = sorted(set(pairs.values_list("exchange__slug", flat=True)))
    quotes = sorted(set(pairs.values_list("quote__symbol", flat=True)))
    return exchanges, quotes
