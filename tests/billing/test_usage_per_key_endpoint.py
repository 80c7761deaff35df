"""This month's requests and bytes per key and per endpoint: counted by the statement that
counts the month (no round trip of its own), by route (a pair's calls add up under one
endpoint), listed in GET /me/usage (`by_key_and_endpoint`) and on the usage page."""

import pytest
from django.test import Client

from accounts.services import api_key_create
from billing import metering, tickets, usage
from billing.models import KeyEndpointUsage, UsageCounter
from market.services import catalog_seed_demo

STATUS = "GET /api/v1/streams/{exchange}/{base}/{quote}/status"


@pytest.fixture
def keys(account, client_for):
    catalog_seed_demo()
    first = api_key_create(account=account, name="research")
    second = api_key_create(account=account, name="production")
    return client_for(first.plaintext), client_for(second.plaintext), first.api_key, second.api_key


def per_key(account) -> dict:
    return {(row.api_key.name, row.endpoint): (row.requests, row.bytes)
            for row in KeyEndpointUsage.objects.filter(account=account).select_related("api_key")}


def test_each_key_and_endpoint_gets_its_requests_and_exact_bytes(account, keys):
    research, production, _, _ = keys
    sizes = {}
    for client, name in ((research, "research"), (research, "research"), (production, "production")):
        response = client.get("/api/v1/streams")  # counted before its view, bytes after
        sizes.setdefault(name, []).append(len(response.content))
    subscribed = production.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT"},
                                 format="json")
    assert subscribed.status_code == 201
    statuses = [research.get(f"/api/v1/streams/{path}/status") for path in ("binance/BTC/USDT", "coinbase/ETH/USD",
                                                                            "BINANCE/btc/usdt")]
    # coinbase/ETH/USD is not subscribed: its 402 is the endpoint's own answer, counted too
    assert [response.status_code for response in statuses] == [200, 402, 200]
    assert per_key(account) == {
        ("research", "GET /api/v1/streams"): (2, sum(sizes["research"])),
        ("production", "GET /api/v1/streams"): (1, sum(sizes["production"])),
        ("production", "POST /api/v1/streams"): (1, len(subscribed.content)),
        ("research", STATUS): (3, sum(len(response.content) for response in statuses)),
    }
    month = UsageCounter.objects.get(account=account, period="month")
    assert (month.requests, month.bytes) == (sum(r for r, _ in per_key(account).values()),
                                             sum(b for _, b in per_key(account).values()))


def test_refused_requests_count_for_no_key(account, keys, plans):
    research, _, _, _ = keys
    account.plan = plans["free"]
    account.save()
    assert research.get("/api/v1/streams").status_code == 403
    assert research.get("/api/v1/me/usage").status_code == 200  # never counted
    assert per_key(account) == {}


def test_me_usage_lists_the_month_per_key_and_endpoint_and_they_add_up(account, keys):
    research, production, first, second = keys
    research.get("/api/v1/streams")
    production.get("/api/v1/streams/binance/BTC/USDT/status")
    production.get("/api/v1/streams/binance/BTC/USDT/status")
    usage = production.get("/api/v1/me/usage").json()
    lines = usage["by_key_and_endpoint"]
    assert [(line["key"], line["key_name"], line["endpoint"], line["requests"]) for line in lines] == [
        (first.display, "research", "GET /api/v1/streams", 1),
        (second.display, "production", STATUS, 2),
    ]
    assert all(line["key_revoked"] is False and line["last_request_at"].endswith("Z") for line in lines)
    assert sum(line["requests"] for line in lines) == usage["requests"]["used"] == 3
    assert sum(line["bytes"] for line in lines) == usage["bytes"]["used"]
    toon = production.get("/api/v1/me/usage?format=toon").content.decode()
    assert "by_key_and_endpoint[2]{key,key_name,key_revoked,endpoint,requests,bytes,last_request_at}:" in toon


@pytest.mark.postgres
def test_counting_per_key_adds_no_round_trip(account, keys, monkeypatch):
    """On PostgreSQL a request counted when served runs one metering statement, as before;
    one counted before its view runs two (the count, then the bytes): the key's row rides
    along. (SQLite runs its upserts in one local transaction: no network between them.)"""
    research, _, _, _ = keys
    research.get("/api/v1/streams/binance/BTC/USDT/status")  # warm: key verified, account read
    research.get("/api/v1/streams")
    statements = []
    for module, name in ((metering, "fetch_prepared"), (metering, "fetch_one_prepared"),
                         (usage, "fetch_prepared"), (usage, "fetch_one_prepared")):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda sql, params, _original=original, **kw: (
            statements.append(sql), _original(sql, params, **kw))[1])
    research.get("/api/v1/streams/binance/BTC/USDT/status")
    assert len(statements) == 1, statements
    statements.clear()
    research.get("/api/v1/streams")
    assert len(statements) == 2, statements
    assert per_key(account)[("research", STATUS)][0] == 2


def test_the_endpoint_is_the_route_not_the_raw_path():
    assert tickets.endpoint_label("GET", "api/v1/streams/<str:exchange>/<str:base>/<str:quote>/status") == STATUS
    assert tickets.endpoint_label("POST", "api/v1/market/candlestick") == "POST /api/v1/market/candlestick"
    assert tickets.endpoint_label("X" * 300, "api/v1/streams") == "OTHER /api/v1/streams"


def test_a_made_up_method_on_a_counted_endpoint_is_counted_under_other(account, keys):
    research, _, first, _ = keys
    response = research.generic("BREW" * 40, "/api/v1/streams")
    assert response.status_code == 405
    assert KeyEndpointUsage.objects.get(api_key=first).endpoint == "OTHER /api/v1/streams"


def test_the_usage_page_shows_the_month_per_key_and_per_endpoint(account, keys):
    research, production, _, _ = keys
    research.get("/api/v1/streams")
    production.get("/api/v1/streams")
    production.get("/api/v1/streams/binance/BTC/USDT/status")
    client = Client()
    client.force_login(account.users.get())
    html = client.get("/account/usage/").content.decode()
    by_key = html.split('id="usage-by-key-table"')[1].split("</table>")[0]
    by_endpoint = html.split('id="usage-by-endpoint-table"')[1].split("</table>")[0]
    assert by_key.index("production") < by_key.index("research")  # busiest first
    assert "GET /api/v1/streams</code>" in by_endpoint and f"{STATUS}</code>" in by_endpoint
    assert by_endpoint.index("GET /api/v1/streams</code>") < by_endpoint.index(STATUS)
