"""Statements that run on every request of a hot path."""

from __future__ import annotations

import logging
import threading
import time
import weakref

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)


class Int8Array(list):
    """A list of ints (or None) sent as PostgreSQL's bigint[] in binary. psycopg looks at
    every item of a plain list, twice, to choose the array's type: for the columns of a
    tick's bars that was 7 % of an ingestion process's CPU."""


class Float8Array(list):
    """A list of floats (or None) sent as double precision[] in binary (see Int8Array)."""


def _typed_cursor(raw_connection):
    """A psycopg cursor of the connection, whose adapters know Int8Array and Float8Array
    (registered once per connection: its cursors inherit them)."""
    import psycopg

    if raw_connection not in _TYPED_CONNECTIONS:
        from psycopg.postgres import types
        from psycopg.types.array import ListBinaryDumper

        for cls, name in ((Int8Array, "int8"), (Float8Array, "float8")):
            info = types[name]
            dumper = type(f"{name.title()}ArrayBinaryDumper", (ListBinaryDumper,),
                          {"element_oid": info.oid, "oid": info.array_oid})
            raw_connection.adapters.register_dumper(cls, dumper)
        _TYPED_CONNECTIONS.add(raw_connection)
    return psycopg.Cursor(raw_connection)


_TYPED_CONNECTIONS: weakref.WeakSet = weakref.WeakSet()


def fetch_prepared(sql: str, params, *, binary: bool = False) -> list[tuple]:
    """The rows of `sql` (psycopg placeholders). On PostgreSQL the statement is prepared
    once per pooled connection and only executed after, with its parameters bound on the
    server: parsing and planning it again took about 0.1 ms of the database's CPU per
    request, on two cores the server shares (docs/DECISIONS.md). Django's cursors bind
    parameters in the client and never prepare, so this one cursor is psycopg's own,
    under Django's error translation. Elsewhere (SQLite), a plain cursor. `binary`: the
    results in PostgreSQL's binary format (the same Python values; a float is read from
    its 8 bytes instead of parsed from its text, a third of the cost of fetching bars)."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors, _typed_cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True, binary=binary)
        return cursor.fetchall()


def execute_prepared(sql: str, params) -> None:
    """Run `sql`, which returns no rows, prepared as `fetch_prepared` (PostgreSQL), or on a
    plain cursor elsewhere."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return
    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors, _typed_cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)


def fetch_one_prepared(sql: str, params) -> tuple | None:
    """The first row of `sql`, prepared as `fetch_prepared`; None when there is none."""
    rows = fetch_prepared(sql, params)
    return rows[0] if rows else None


# A restart of the database ends every session, and a pool hands its idle connections out
# as they were: after recovery each dead one would fail a request of its own (502). When a
# statement fails for want of the database, both pools (the request threads' and the event
# loop's) check their idle connections, discarding the dead and replacing them in the
# background, at most once a second; never on the caller's thread, which may be the loop.
_IDLE_CHECK_INTERVAL_SECONDS = 1.0
_next_idle_check = 0.0
_loop_checks: set = set()  # the loop's check tasks, held until done


def check_idle_connections_soon() -> None:
    """Have both pools drop their dead idle connections (see above)."""
    global _next_idle_check
    now = time.monotonic()
    if now < _next_idle_check or connection.vendor != "postgresql":
        return
    _next_idle_check = now + _IDLE_CHECK_INTERVAL_SECONDS
    pool = connection.pool
    if pool is not None:
        threading.Thread(target=_check_pool, args=(pool,), name="db-pool-check", daemon=True).start()
    for loop, opening in list(_loop_pools.items()):
        if opening.done() and not opening.cancelled() and opening.exception() is None and not loop.is_closed():
            loop.call_soon_threadsafe(_check_loop_pool, loop, opening.result())


def _check_pool(pool) -> None:
    try:
        pool.check()
    except Exception as exc:  # noqa: BLE001 - the pool keeps replacing connections on its own
        logger.info("Pool check failed: %s", exc)


def _check_loop_pool(loop, pool) -> None:
    async def check():
        try:
            await pool.check()
        except Exception as exc:  # noqa: BLE001 - as _check_pool
            logger.info("Event loop pool check failed: %s", exc)

    task = loop.create_task(check())
    _loop_checks.add(task)
    task.add_done_callback(_loop_checks.discard)


# The pool of connections the event loop's own statements use (one per process: daphne
# runs one loop), opened by the first of them. Apart from the request threads' pool.
_loop_pools: dict = {}
LOOP_APPLICATION_NAME = "event loop"


async def _loop_pool():
    """The loop's pool, opened once: concurrent first statements wait on the same opening."""
    import asyncio

    loop = asyncio.get_running_loop()
    opening = _loop_pools.get(loop)
    if opening is None:
        opening = _loop_pools[loop] = loop.create_task(_open_loop_pool())
    try:
        return await asyncio.shield(opening)
    except BaseException:
        if opening.done() and _loop_pools.get(loop) is opening:
            del _loop_pools[loop]  # the next statement tries again
        raise


async def _open_loop_pool():
    from django.db import connections
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

    params = connections["default"].get_connection_params()
    params.pop("cursor_factory", None)  # Django's cursor is for sync connections
    params["autocommit"] = True
    params.setdefault("application_name", LOOP_APPLICATION_NAME)  # told apart in pg_stat_activity
    # a statement that hangs (a lock, a half-open connection) gives its connection back in time
    timeout_ms = int(settings.DB_LOOP_STATEMENT_TIMEOUT_SECONDS * 1000)
    params["options"] = f"{params.get('options', '')} -c statement_timeout={timeout_ms}".strip()
    pool = AsyncConnectionPool(kwargs=params, connection_class=AsyncConnection, open=False, name="event-loop",
                               min_size=1, max_size=settings.DB_LOOP_POOL_MAX,
                               timeout=settings.DB_LOOP_POOL_TIMEOUT_SECONDS)
    await pool.open()
    return pool


def can_fetch_on_loop() -> bool:
    """Whether `fetch_prepared_on_loop` serves here: PostgreSQL (psycopg's async connections);
    SQLite has no client that waits without a thread."""
    return connection.vendor == "postgresql" and settings.DB_LOOP_POOL_MAX > 0


def statement_not_sent(exc: BaseException) -> bool:
    """Whether `exc` (from `fetch_prepared_on_loop`) came before the statement left this
    process: no connection was to be had from the loop's pool in its time (after a restart of
    the database it is still replacing the dead ones). The statement then changed nothing,
    so a caller may hand its work to another path instead of reporting it as unknown."""
    from psycopg_pool import PoolTimeout

    seen = exc
    while seen is not None:
        if isinstance(seen, PoolTimeout):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def fetch_prepared_on_loop(sql: str, params, *, binary: bool = False) -> list[tuple]:
    """`fetch_prepared` for code running on the event loop: the statement waits on the
    socket with no thread and no hand-off of the interpreter lock (docs/DECISIONS.md).
    PostgreSQL only (`can_fetch_on_loop`)."""
    from django.db import connections

    # psycopg's errors as Django's (OperationalError and the like), as on the threads' path
    with connections["default"].wrap_database_errors:
        pool = await _loop_pool()
        async with pool.connection() as conn:
            cursor = await conn.execute(sql, params, prepare=True, binary=binary)
            return await cursor.fetchall()
