"""Statements that run on every request of a hot path."""

from __future__ import annotations

from django.db import connection


def fetch_prepared(sql: str, params) -> list[tuple]:
    """The rows of `sql` (psycopg placeholders). On PostgreSQL the statement is prepared
    once per pooled connection and only executed after, with its parameters bound on the
    server: parsing and planning it again took about 0.1 ms of the database's CPU per
    request, on two cores the server shares (docs/DECISIONS.md). Django's cursors bind
    parameters in the client and never prepare, so this one cursor is psycopg's own,
    under Django's error translation. Elsewhere (SQLite), a plain cursor."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    import psycopg

    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchall()


def fetch_one_prepared(sql: str, params) -> tuple | None:
    """The first row of `sql`, prepared as `fetch_prepared`; None when there is none."""
    rows = fetch_prepared(sql, params)
    return rows[0] if rows else None
