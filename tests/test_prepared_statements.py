"""The hot paths' statements are prepared once per pooled PostgreSQL connection, and run
unprepared where the deployment turns prepared statements off."""

import pytest
from django.db import DatabaseError, connection

from config.db import fetch_prepared
from market.selectors import bars_range
from market.services import catalog_seed_demo

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [statement for (statement,) in cursor.fetchall()]


def test_a_series_fetch_is_prepared_once_and_then_only_executed():
    pair = catalog_seed_demo()[0]
    for _ in range(3):
        list(bars_range(pair=pair, granularity="day", from_ms=0, to_ms=10**13, columns=("ts_ms", "close")))
    fetches = [s for s in prepared_statements() if "ts_ms" in s and "ORDER BY ts_ms" in s]
    assert len(fetches) == 1


def test_with_prepared_statements_off_the_same_rows_come_back_unprepared(monkeypatch):
    monkeypatch.setattr(connection.connection, "prepare_threshold", None)
    assert fetch_prepared("SELECT %s::int + 1", [41]) == [(42,)]
    assert not any("+ 1" in s for s in prepared_statements())


def test_a_failing_hot_statement_raises_djangos_database_error():
    with pytest.raises(DatabaseError):
        fetch_prepared("SELECT * FROM no_such_table WHERE id = %s", [1])
