from datetime import datetime, timezone

import pytest
from django.test import Client

from billing.selectors import pair_bills_month
from config import clock
from streaming.models import StreamSubscription
from streaming.services import subscription_remove, subscription_upsert


@pytest.fixture
def signed_in(account):
    client = Client()
    client.force_login(account.users.get())
    return client


def test_pair_days_count_each_utc_day_touched(account, btc, monkeypatch):
    for moment, action in ((datetime(2026, 11, 3, 23, 0, tzinfo=timezone.utc), "sub"),
                           (datetime(2026, 11, 5, 1, 0, tzinfo=timezone.utc), "unsub"),
                           (datetime(2026, 11, 10, 12, 0, tzinfo=timezone.utc), "sub")):
        monkeypatch.setattr(clock, "utcnow", lambda m=moment: m)
        if action == "sub":
            subscription_upsert(account=account, pair=btc, metrics=["trade"])
        else:
            subscription_remove(account=account, pair=btc)
    now = datetime(2026, 11, 12, 8, 0, tzinfo=timezone.utc)
    bills = pair_bills_month(account=account, now=now, pair_price_usd=30)
    assert len(bills) == 1
    assert bills[0].days == 3 + 3  # Nov 3-5, then Nov 10-12
    assert bills[0].cost_usd == 6.0 and bills[0].open_now


def test_streams_page_lists_subscriptions_with_state_and_bill(signed_in, account, btc):
    subscription_upsert(account=account, pair=btc, metrics=["trade", "book"])
    html = signed_in.get("/account/streams/").content.decode()
    assert "binance/BTC/USDT" in html and "trade, book" in html and "REQUESTED" in html
    assert 'id="billing"' in html and "simulated" in html


def test_unsubscribe_from_the_page(signed_in, account, btc):
    subscription = subscription_upsert(account=account, pair=btc, metrics=["trade"])[0]
    response = signed_in.post(f"/account/streams/{subscription.pk}/unsubscribe/")
    assert response.status_code == 302
    assert not StreamSubscription.objects.filter(pk=subscription.pk).exists()


def test_cannot_unsubscribe_someone_elses(signed_in, make_account, btc):
    other = subscription_upsert(account=make_account(), pair=btc, metrics=["trade"])[0]
    assert signed_in.post(f"/account/streams/{other.pk}/unsubscribe/").status_code == 404
    assert StreamSubscription.objects.filter(pk=other.pk).exists()


def test_live_page_lists_subscriptions_and_hands_out_stream_urls(signed_in, account, btc):
    subscription = subscription_upsert(account=account, pair=btc, metrics=["trade"])[0]
    html = signed_in.get("/account/live/").content.decode()
    assert "binance/BTC/USDT" in html and "live.js" in html
    body = signed_in.get(f"/account/live/{subscription.pk}/token/").json()
    assert body["events_url"].startswith("/api/v1/streams/binance/BTC/USDT/events?token=")


def test_live_token_only_for_own_subscriptions(signed_in, make_account, btc):
    other = subscription_upsert(account=make_account(), pair=btc, metrics=["trade"])[0]
    assert signed_in.get(f"/account/live/{other.pk}/token/").status_code == 404
