"""The series answered on the event loop in process (PostgreSQL): ranges the loop reads
itself (longer than 400 bars, reaching into the current period, empty, of a pair without
data) are answered there, not left to the view, with the view's body byte for byte."""

import asyncio
from datetime import datetime, timedelta, timezone

import pytest
from django.test import RequestFactory

from config import db, loop
from config.clock import now_ms
from market.bars import HOUR_MS, floor_ms
from market.services import bars_write, catalog_seed_demo

from .test_bar_store import trade_bar

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TODAY = datetime.now(timezone.utc).date()


def _hourly(start, end, **extra) -> dict:
    return {"exchange": "binance", "symbol": "BTC-USDT", "start": start.isoformat(), "end": end.isoformat(),
            "resolution": "hourly", **extra}


ASKED = [
    ("candlestick", _hourly(TODAY - timedelta(days=30), TODAY - timedelta(days=1))),  # 720 hours
    ("candlestick", _hourly(TODAY - timedelta(days=30), TODAY - timedelta(days=1), format="toon")),
    ("candlestick", _hourly(TODAY - timedelta(days=1), TODAY)),  # the current hour included
    ("candlestick", _hourly(TODAY - timedelta(days=1), TODAY, format="toon")),
    ("trades", _hourly(TODAY - timedelta(days=3), TODAY)),
    ("spread", _hourly(TODAY, TODAY, format="toon")),
    ("limit-orders", _hourly(TODAY - timedelta(days=1), TODAY, side="bid")),
    ("candlestick", _hourly(TODAY.replace(year=2020), TODAY.replace(year=2020))),  # no bars there
    ("candlestick", _hourly(TODAY - timedelta(days=1), TODAY, symbol="SOL-USDT", format="toon")),  # no data
]


@pytest.fixture
def seeded(settings, client_for, api_key):
    settings.CATALOG_CACHE_SECONDS = settings.ACCOUNT_CACHE_SECONDS = 60.0
    pair = next(p for p in catalog_seed_demo() if p.path == "binance/BTC/USDT")
    current = floor_ms(now_ms(), "hour")
    bars = [trade_bar(current - i * HOUR_MS, [40000.0 + i, 40000.5 + i * 1.25]) for i in range(24 * 31)]
    for i, bar in enumerate(bars):
        bar.quote_count, bar.bid_price, bar.ask_price = 2, 39999.0 + i, 40001.0 + i
        bar.spread_bps_sum, bar.spread_bps_min, bar.spread_bps_max = 0.9, 0.4, 0.5
        bar.book_samples, bar.bid_amount_sum, bar.ask_amount_sum = 3600, 7200.5 + i, 3600.25
    bars_write(pair=pair, granularity="hour", bars=sorted(bars, key=lambda b: b.ts_ms))
    return client_for(api_key.plaintext), api_key.plaintext


def _on_the_loop(path: str, request):
    from config.urls import LOOP_ROUTES

    async def answer():
        try:
            return await loop.answer(LOOP_ROUTES[path], request)
        finally:  # the loop's pool ends with its loop
            opening = db._loop_pools.pop(asyncio.get_running_loop(), None)
            if opening is not None and opening.done() and opening.exception() is None:
                await opening.result().close()

    return asyncio.run(answer())


@pytest.mark.parametrize(("name", "body"), ASKED)
def test_the_loop_reads_the_range_itself_and_answers_the_views_body(seeded, name, body):
    client, key = seeded
    path = f"/api/v1/market/{name}"
    by_view = client.post(path, body, format="json")  # reads the pair; verifies the key
    assert by_view.status_code == 200
    request = RequestFactory().post(path, data=body, content_type="application/json",
                                    HTTP_AUTHORIZATION=f"Bearer {key}")
    on_loop = _on_the_loop(path, request)
    assert on_loop is not None, "left to the view"
    assert on_loop.status_code == 200
    assert on_loop.content == by_view.content
    assert on_loop["Content-Type"] == by_view["Content-Type"]
