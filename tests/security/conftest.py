"""Shared worlds for the security tests: two Pro accounts, A and B, each with keys,
subscriptions, usage and data, so that a request that reaches the wrong account's objects
shows up as a changed or leaked row."""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field

import pytest
from django.test import Client

from accounts.models import Account, ApiKey
from accounts.services import api_key_create
from billing.models import UsageCounter
from market.bars import Bar
from market.models import Pair
from market.services import bars_write, catalog_seed_demo
from streaming.models import StreamSubscription
from streaming.live import publish_bars
from config.clock import now_ms
from streaming.services import subscription_upsert
from tests.urlconf import url_routes

PASSWORD = "correct horse battery"
KEY_PATTERN = re.compile(r"mdp_live_[0-9A-Za-z]{50}")


@dataclass
class Customer:
    account: Account
    email: str
    keys: list  # CreatedKey: .plaintext, .api_key
    subscriptions: dict[str, StreamSubscription] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.keys[0].plaintext

    def web(self, **client_kwargs) -> Client:
        client = Client(**client_kwargs)
        assert client.login(email=self.email, password=PASSWORD)
        return client


def account_state(account: Account) -> dict:
    """Everything of an account that another account must never change."""
    return {
        "subscriptions": sorted(StreamSubscription.objects.filter(account=account)
                                .values_list("pair_id", "trade", "book", "quote")),
        "usage": sorted(UsageCounter.objects.filter(account=account)
                        .values_list("period", "period_start", "requests", "bytes")),
        "keys": sorted(ApiKey.objects.filter(account=account)
                       .values_list("id", "lookup_id", "name", "revoked_at")),
    }


def seed_recent_bars(pair: Pair, *, hours: int = 3, base_price: float = 42_000.0) -> int:
    """Minute bars with trades, book and quotes for the last few hours (rolled up to hours
    and days) and a published live bar, so snapshots, live and series answer with data."""
    from market.bars import floor_ms

    end = floor_ms(now_ms(), "minute")
    bars = []
    for i in range(hours * 60):
        price = base_price + i
        bars.append(Bar(ts_ms=end - (hours * 60 - i) * 60_000, trade_count=3, open=price, high=price + 5,
                        low=price - 5, close=price + 1, volume=1.5, buy_volume=1.0, sell_volume=0.5,
                        notional=1.5 * price, price_mean=price, price_m2=2.0, book_samples=60,
                        bid_amount_sum=600.0, ask_amount_sum=540.0, bid_notional_sum=600.0 * price,
                        ask_notional_sum=540.0 * price, bid_orders_sum=120, ask_orders_sum=110,
                        quote_count=10, bid_price=price - 0.5, ask_price=price + 0.5,
                        spread_bps_sum=2.4, spread_bps_min=0.2, spread_bps_max=0.3))
    bars_write(pair=pair, granularity="minute", bars=bars)
    publish_bars(pair=pair, bars=bars[-1:])
    return len(bars)


def api_paths():
    """Every concrete API path of the URLconf, path converters filled with a real pair."""
    for route in url_routes():
        if route.startswith(("api/", "v1/")) or route.startswith("^"):
            if "(?P<rest>" in route:
                route = route.split("(?P<rest>")[0].lstrip("^").replace("(?:api/)?", "") + "no/such/route"
            filled = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: {"exchange": "binance", "base": "BTC",
                                                             "quote": "USDT"}[m.group(1)], route)
            yield "/" + filled


@pytest.fixture
def asgi_application():
    """The production ASGI entry point (config.asgi: Django plus the SSE app). Importing it
    sets the collector up as a long-lived server's (as tests/conftest.py did for the test
    process) and adds the pause log, removed here: it would outlive pytest's captured
    streams. What
    the worker loaded is frozen out of the collector's scans, as a server's start-up state
    is: a full collection of a test worker's heap stalled an in-process request for 720 ms,
    past the fuzz test's SSE read deadline."""
    from config import collector
    from config.asgi import application

    if collector._log_long_pauses in gc.callbacks:
        gc.callbacks.remove(collector._log_long_pauses)
    gc.collect()
    gc.freeze()
    yield application


@pytest.fixture
def catalog(db):
    return {p.path: p for p in catalog_seed_demo()}


@pytest.fixture
def two_customers(make_account, catalog) -> tuple[Customer, Customer]:
    """A and B on the Pro plan: A subscribes binance/BTC/USDT (all metrics); B subscribes
    binance/BTC/USDT (trade only) and coinbase/ETH/USD; each holds two keys, B's first
    used once so B has usage rows."""
    customers = []
    for label in ("a", "b"):
        email = f"{label}@security.example.com"
        account = make_account(email=email)
        keys = [api_key_create(account=account, name=f"{label} key 1"),
                api_key_create(account=account, name=f"{label} key 2")]
        customers.append(Customer(account=account, email=email, keys=keys))
    a, b = customers
    btc, eth = catalog["binance/BTC/USDT"], catalog["coinbase/ETH/USD"]
    a.subscriptions["binance/BTC/USDT"] = subscription_upsert(account=a.account, pair=btc,
                                                              metrics=["trade", "book", "quote"])[0]
    b.subscriptions["binance/BTC/USDT"] = subscription_upsert(account=b.account, pair=btc, metrics=["trade"])[0]
    b.subscriptions["coinbase/ETH/USD"] = subscription_upsert(account=b.account, pair=eth,
                                                              metrics=["book", "quote"])[0]
    from rest_framework.test import APIClient

    b_api = APIClient()
    b_api.credentials(HTTP_AUTHORIZATION=f"Bearer {b.key}")
    for _ in range(3):
        assert b_api.get("/api/v1/streams").status_code == 200
    return a, b
