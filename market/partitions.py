"""Time partitions of the history tables in PostgreSQL (docs/DECISIONS.md, "History
partitioned by time"). A partitioned model names its span and its partition key:

    partition_span = "day" | "month" | "year"      # one partition per UTC day / month / year
    partition_key = "ts_ms"                        # an epoch-ms column

Partitions are named <table>_p<YYYYMMDD | YYYYMM | YYYY> and hold [start, end) of the
partition key. They are made ahead (migrate, and the beat tasks
`market.bar_partitions_upkeep` and `schemes.event_partitions_upkeep`) and, before any
write that needs one, on demand (`partitions_ensure`), so a write never fails for a
missing partition; retention drops whole partitions (`partitions_drop_before`).
On SQLite the tables are plain and every function here does nothing."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from django.db import connection, transaction

from config import clock

DAY_MS = 86_400_000
# Partitions made ahead of time, from today on: the beat task runs hourly, so three days
# ahead survive two days of a stopped beat before a write has to make one itself.
DAYS_AHEAD = 3

_known: dict[str, set[int]] = {}  # table -> starts of partitions this process saw exist


def partitioned() -> bool:
    return connection.vendor == "postgresql"


def span_bounds(start_ms: int, span: str) -> tuple[int, int]:
    """[start, end) of the span (UTC day, month or year) holding start_ms."""
    moment = datetime.fromtimestamp(start_ms / 1000, tz=timezone.utc)
    if span == "day":
        first = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        after = first + timedelta(days=1)
    elif span == "month":
        first = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        after = (first + timedelta(days=32)).replace(day=1)
    elif span == "year":
        first = moment.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
        after = first.replace(year=first.year + 1)
    else:
        raise ValueError(f"unknown partition span {span!r}")
    return int(first.timestamp() * 1000), int(after.timestamp() * 1000)


_SUFFIX_FORMAT = {"day": "%Y%m%d", "month": "%Y%m", "year": "%Y"}


def partition_name(table: str, start_ms: int, span: str) -> str:
    return f"{table}_p{datetime.fromtimestamp(start_ms / 1000, tz=timezone.utc):{_SUFFIX_FORMAT[span]}}"


def _existing(table: str) -> dict[int, str]:
    """The table's partitions, by start (bounds read from the catalog, not from names)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass", [table])
        rows = cursor.fetchall()
    out = {}
    for name, bound in rows:
        found = re.search(r"FROM \('?(-?\d+)'?\) TO", bound)
        if found:
            out[int(found.group(1))] = name
    return out


def _trusted(start_ms: int, span: str) -> bool:
    """Whether a partition seen once may be assumed to exist still: only one that ended less
    than a day ago or later, which retention never drops (partitions_drop_before keeps every
    partition that ended within the last day). Older ones are looked up for each write."""
    return span_bounds(start_ms, span)[1] > clock.now_ms() - DAY_MS


def partitions_ensure(model, keys) -> None:
    """Make sure a partition exists for each partition-key value in `keys`. Runs in the
    caller's transaction; concurrent makers of the same partition take turns on an
    advisory lock, so neither fails."""
    table_partitions_ensure(model._meta.db_table, model.partition_span, keys)


def table_partitions_ensure(table: str, span: str, keys) -> None:
    if not partitioned():
        return
    known = _known.setdefault(table, set())
    days = {key - key % DAY_MS for key in keys}  # UTC days: epoch time has no leap seconds
    wanted = days if span == "day" else {span_bounds(day, span)[0] for day in days}
    missing = [start for start in wanted if start not in known or not _trusted(start, span)]
    if not missing:
        return
    existing = _existing(table)
    for start in sorted(missing):
        if start not in existing:
            _create(table, start, span)
    # remembered once committed: a partition made in a transaction that rolls back is gone
    transaction.on_commit(lambda: known.update(missing))


def _create(table: str, start_ms: int, span: str) -> None:
    name = partition_name(table, start_ms, span)
    end_ms = span_bounds(start_ms, span)[1]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {quote(name)} PARTITION OF {quote(table)} "
                       f"FOR VALUES FROM ({start_ms}) TO ({end_ms})")


# Making or dropping a partition locks its parent table against every reader until the
# transaction ends; a beat task waits at most this long behind a long read, then fails and
# runs again within the hour (writes make what they need themselves).
UPKEEP_LOCK_TIMEOUT = "5s"


def _upkeep_lock_timeout() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{UPKEEP_LOCK_TIMEOUT}'")


def partitions_ahead(model, *, now_ms: int, days: int = DAYS_AHEAD) -> None:
    """Partitions from now to `days` ahead (the beat task)."""
    if not partitioned():
        return
    with transaction.atomic():
        _upkeep_lock_timeout()
        partitions_ensure(model, range(now_ms, now_ms + (days + 1) * DAY_MS, DAY_MS))


_WIDTH = {"bigint": 8, "double precision": 8, "integer": 4, "smallint": 2}  # others (text, json) vary: last


def table_rebuild_partitioned(schema_editor, model, *, key: str, span: str, primary_key: tuple[str, ...],
                              extra: tuple[str, ...] = (), defaults: dict[str, str] | None = None) -> None:
    """Migrate a model's table to its partitioned form, keeping every row: rename the table,
    create the partitioned one (columns widest first, so no alignment padding), make the
    partitions its rows and the next days need, copy, drop the old table. The model's
    constraints and indexes are made on the new table; `extra`: more table constraints
    (foreign keys), formatted with {table}; `defaults`: column -> SQL default."""
    table = model._meta.db_table
    old = f"{table}_old"
    quote = schema_editor.quote_name
    fields = [f for f in model._meta.local_concrete_fields if f.column]
    columns = []
    for field in sorted(fields, key=lambda f: -_WIDTH.get(f.db_type(schema_editor.connection), 0)):
        default = (defaults or {}).get(field.column)
        columns.append(f"{quote(field.column)} {field.db_type(schema_editor.connection)}"
                       f"{'' if field.null else ' NOT NULL'}{f' DEFAULT {default}' if default else ''}")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {quote(table)} RENAME TO {quote(old)}")
        # index and constraint names are unique per schema: the old table's step aside
        cursor.execute("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE i.indrelid = %s::regclass", [old])
        for (index,) in cursor.fetchall():
            cursor.execute(f"ALTER INDEX {quote(index)} RENAME TO {quote(index[:50] + '_old')}")
        pk = ", ".join(quote(column) for column in primary_key)
        constraints = [str(c.constraint_sql(model, schema_editor)) for c in model._meta.constraints]
        body = ",\n  ".join(columns + [f"CONSTRAINT {quote(table + '_pkey')} PRIMARY KEY ({pk})"] + constraints
                             + [c.format(table=table) for c in extra])
        cursor.execute(f"CREATE TABLE {quote(table)} (\n  {body}\n) PARTITION BY RANGE ({quote(key)})")
        for index in model._meta.indexes:
            cursor.execute(str(index.create_sql(model, schema_editor)))
        cursor.execute(f"SELECT DISTINCT {quote(key)} - {quote(key)} % {DAY_MS} FROM {quote(old)}")
        table_partitions_ensure(table, span, [day for (day,) in cursor.fetchall()])  # only spans holding rows
        now_ms = clock.now_ms()
        table_partitions_ensure(table, span, range(now_ms, now_ms + (DAYS_AHEAD + 1) * DAY_MS, DAY_MS))
        names = ", ".join(quote(f.column) for f in fields)
        cursor.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM {quote(old)}")
        cursor.execute(f"DROP TABLE {quote(old)}")
    _known.pop(table, None)


def partitions_drop_before(model, *, cutoff_ms: int, now_ms: int, unless_newer_than: str | None = None) -> list[str]:
    """Drop every partition whose span ended at or before cutoff_ms (and at least a day
    before now_ms), whole: no row is deleted. With `unless_newer_than`, a partition that
    still holds a row whose column is >= cutoff_ms stays (scheme events are partitioned by
    build start, kept by detection time). Returns the names dropped.

    Two steps: the partitions are detached (milliseconds under the parent's lock), then
    dropped; freeing a day of files takes seconds (docs/BENCHMARKS.md), and a drop while
    attached would hold the parent, every read and write of the table, that long. A purge
    stopped between the steps leaves detached tables, which the next one drops."""
    if not partitioned():
        return []
    table, span = model._meta.db_table, model.partition_span
    quote = connection.ops.quote_name
    detached = []
    with transaction.atomic(), connection.cursor() as cursor:
        _upkeep_lock_timeout()
        # rows written earlier in this transaction have their foreign-key checks pending
        # (deferred), and a table with pending checks cannot be detached: run them now
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for start, name in sorted(_existing(table).items()):
            end = span_bounds(start, span)[1]
            if end > cutoff_ms or end > now_ms - DAY_MS:
                continue
            if unless_newer_than:
                cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {quote(name)} WHERE {quote(unless_newer_than)} >= %s)",
                               [cutoff_ms])
                if cursor.fetchone()[0]:
                    continue
            cursor.execute(f"ALTER TABLE {quote(table)} DETACH PARTITION {quote(name)}")
            _known.get(table, set()).discard(start)
            detached.append(name)
    with transaction.atomic(), connection.cursor() as cursor:
        for name in _detached(table):
            cursor.execute(f"DROP TABLE IF EXISTS {quote(name)}")
    return detached


def _detached(table: str) -> list[str]:
    """Tables named as the table's partitions that are no longer attached to it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition "
                       "AND relnamespace = current_schema()::regnamespace AND starts_with(relname, %s) "
                       "AND substr(relname, %s) ~ '^[0-9]+$'", [f"{table}_p", len(table) + 3])
        return [name for (name,) in cursor.fetchall()]
