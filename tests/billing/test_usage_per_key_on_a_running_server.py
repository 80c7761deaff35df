"""Usage per key and endpoint on running servers (full mode): the series answered on the
event loop and by their view, the status of several pairs and a subscribe all count to
their key and route, and /me/usage (on the loop and by its view) lists them, adding up to
the month's figures."""

from datetime import datetime, timedelta, timezone

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.services import api_key_create
from market.models import Pair
from market.services import catalog_seed_demo
from tests.integration.faults import seed_hour_history
from config.clock import now_ms
from tests.integration.servers import daphne_processes, database_url_for, loop_connections

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TODAY = datetime.now(timezone.utc).date()
CLOSED = {"exchange": "binance", "symbol": "BTC-USDT", "start": (TODAY - timedelta(days=3)).isoformat(),
          "end": (TODAY - timedelta(days=1)).isoformat()}
CANDLES = "POST /api/v1/market/candlestick"
STATUS = "GET /api/v1/streams/{exchange}/{base}/{quote}/status"


def test_each_key_and_route_is_counted_on_the_loop_and_by_the_views_and_usage_lists_them(account):
    catalog_seed_demo()
    pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    seed_hour_history(pair, days=5, now_ms=now_ms())
    research = api_key_create(account=account, name="research")
    production = api_key_create(account=account, name="production")
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(1, env=env) as (on,), daphne_processes(1, env={**env, "DB_LOOP_POOL_MAX": "0"}) as (off,):
        served = {}
        for base in (on, off):
            for created, times in ((research, 3), (production, 2)):
                auth = {"Authorization": f"Bearer {created.plaintext}"}
                for _ in range(times):
                    response = httpx.post(f"{base}/api/v1/market/candlestick", json=CLOSED, headers=auth, timeout=30)
                    assert response.status_code == 200, response.text
                    served.setdefault((created.api_key.name, CANDLES), []).append(len(response.content))
        auth = {"Authorization": f"Bearer {production.plaintext}"}
        for path in ("binance/BTC/USDT", "coinbase/ETH/USD", "kraken/BTC/USD"):
            response = httpx.get(f"{off}/api/v1/streams/{path}/status", headers=auth, timeout=30)
            assert response.status_code == 402, response.text  # not subscribed: the endpoint's own answer, counted
            served.setdefault(("production", STATUS), []).append(len(response.content))
        assert loop_connections() >= 1  # some of the series were answered on the loop
        on_loop = httpx.get(f"{on}/api/v1/me/usage", headers=auth, timeout=30)
        by_view = httpx.get(f"{off}/api/v1/me/usage", headers=auth, timeout=30)
    assert on_loop.content == by_view.content
    usage = by_view.json()
    lines = {(line["key_name"], line["endpoint"]): (line["requests"], line["bytes"])
             for line in usage["by_key_and_endpoint"]}
    assert lines == {where: (len(sizes), sum(sizes)) for where, sizes in served.items()}
    assert sum(r for r, _ in lines.values()) == usage["requests"]["used"] == 5 * 2 + 3
    assert sum(b for _, b in lines.values()) == usage["bytes"]["used"]
    assert {line["key"] for line in usage["by_key_and_endpoint"]} == {research.api_key.display,
                                                                      production.api_key.display}
