"""A running server reuses a series of closed days for at most HISTORY_CACHE_SECONDS (1 s):
a correction written to the store by another process reaches its answers within that, and
a series reaching into the current day is read afresh on every request."""

import sqlite3
from datetime import datetime, timedelta, timezone

import httpx

from tests.integration.servers import daphne_processes, embedded_site, eventually


def test_a_corrected_closed_day_is_served_within_a_second_and_the_current_day_at_once(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    today = datetime.now(timezone.utc).date()
    yesterday = today - timedelta(days=1)
    database = sqlite3.connect(env["DATABASE_URL"].removeprefix("sqlite:///"), timeout=20)
    pair_id, = database.execute(
        "SELECT p.id FROM market_pair p JOIN market_exchange e ON e.id = p.exchange_id "
        "JOIN market_asset b ON b.id = p.base_id WHERE e.slug = 'binance' AND b.symbol = 'BTC'").fetchone()

    def day_ms(day):
        return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)

    def correct(day, open_):
        with database:
            database.execute("UPDATE market_daybar SET open = ? WHERE pair_id = ? AND ts_ms = ?",
                             (open_, pair_id, day_ms(day)))

    with daphne_processes(1, env={**env, "INGESTION_AUTOSTART": "false"}) as (server,):
        def opens(start, end):
            response = httpx.post(f"{server}/api/v1/market/candlestick", timeout=30,
                                  headers={"Authorization": f"Bearer {key}"},
                                  json={"exchange": "binance", "symbol": "BTC-USDT", "start": start.isoformat(),
                                        "end": end.isoformat()})
            assert response.status_code == 200, response.text
            return {row["date"]: row["open"] for row in response.json()["data"]}

        closed = opens(yesterday, yesterday)
        assert closed, "the demo history has no bar for yesterday"
        correct(yesterday, 12345.5)
        eventually(lambda: opens(yesterday, yesterday)[yesterday.isoformat()], 12345.5, within=1.5)

        if today.isoformat() in opens(yesterday, today):  # the demo's history reaches into today
            correct(today, 23456.5)
            assert opens(yesterday, today)[today.isoformat()] == 23456.5
