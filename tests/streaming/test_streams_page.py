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
    subscription_upsert(account=account, pair=btc, metrics=["trade"])
    html = signed_in.get("/account/live/").content.decode()
    assert "binance/BTC/USDT" in html and "live.js" in html
    body = signed_in.get("/account/live/binance/BTC/USDT/open/").json()
    assert body["events_url"].startswith("/api/v1/streams/binance/BTC/USDT/events?token=")
    assert body["pair"] == "binance/BTC/USDT" and body["granularity"] == "minute"
    assert body["metrics"] == ["trade"] and isinstance(body["bars"], list)


def test_live_open_serves_the_last_hour_of_minute_bars_and_the_position_they_end_at(
        signed_in, account, btc, monkeypatch):
    from market.bars import Bar
    from market.services import bars_write

    now = 1_795_000_000_000
    monkeypatch.setattr(clock, "now_ms", lambda: now)
    minute = now // 60_000 * 60_000
    bars_write(pair=btc, granularity="second", bars=[
        Bar(ts_ms=minute - 7_200_000, trade_count=1, open=1.0, high=1.0, low=1.0, close=1.0, volume=1.0, notional=1.0),
        Bar(ts_ms=minute - 55_000, trade_count=2, open=60_000.0, high=60_010.0, low=59_990.0, close=60_005.0,
            volume=2.0, notional=120_010.0)])
    subscription_upsert(account=account, pair=btc, metrics=["trade", "book"])
    body = signed_in.get("/account/live/binance/btc/usdt/open/").json()
    assert [bar["ts_ms"] for bar in body["bars"]] == [minute - 60_000]  # the hour, not before
    assert body["bars"][0]["close"] == 60_005.0 and "bid_depth" in body["bars"][0]
    assert body["last_event_id"] == f"{minute - 55_000}.0"
    assert "bars" not in signed_in.get("/account/live/binance/BTC/USDT/open/?history=0").json()


def test_live_open_refuses_a_pair_not_subscribed_with_the_link_to_subscribe_it(signed_in, account, btc):
    response = signed_in.get("/account/live/binance/BTC/USDT/open/")
    assert response.status_code == 200 and "events_url" not in response.json()
    error = response.json()["refusal"]
    assert error["code"] == "payment_required" and error["details"]["reason"] == "not_subscribed"
    assert "no longer subscribe to binance/BTC/USDT" in error["message"]
    assert error["details"]["fix_url"] == "/account/streams/?exchange=binance&base=BTC&quote=USDT#picker"
    assert signed_in.get("/account/live/binance/NOPE/USDT/open/").status_code == 404


def test_live_open_refuses_a_lapsed_payment_and_says_to_update_it(make_account, btc):
    from accounts.models import Account

    account = make_account(payment=Account.Payment.LAPSED)
    subscription_upsert(account=account, pair=btc, metrics=["trade"])
    client = Client()
    client.force_login(account.users.get())
    response = client.get("/account/live/binance/BTC/USDT/open/")
    error = response.json()["refusal"]
    assert error["status"] == 402 and "events_url" not in response.json()
    assert error["details"]["reason"] == "payment_lapsed" and error["details"]["fix_label"] == "Update the payment"


def test_the_picker_lists_streamable_pairs_best_ranked_first_and_filters_them(signed_in, catalog):
    html = signed_in.get("/account/streams/").content.decode()
    assert 'id="pair-picker"' in html
    assert html.index('data-pair="binance/BTC/USDT"') < html.index('data-pair="binance/ETH/USDT"')
    only = signed_in.get("/account/streams/?exchange=coinbase&base=eth&quote=").content.decode()
    assert 'data-pair="coinbase/ETH/USD"' in only and 'data-pair="binance/ETH/USDT"' not in only
    by_name = signed_in.get("/account/streams/?base=bitcoin").content.decode()
    assert 'data-pair="binance/BTC/USDT"' in by_name and 'data-pair="binance/ETH/USDT"' not in by_name
    none = signed_in.get("/account/streams/?base=" + "Z" * 40).content.decode()
    assert "No streamable pair matches this search." in none
    too_long = signed_in.get("/account/streams/?quote=" + "Z" * 21)
    assert too_long.status_code == 200 and "Not searched by quote: Ensure this value has at most 20" in \
        too_long.content.decode()


def test_subscribing_from_the_picker_uses_the_chosen_metrics(signed_in, account, btc):
    response = signed_in.post("/account/streams/subscribe/", {"exchange": "binance", "base": "BTC", "quote": "USDT",
                                                             "metrics": ["trade", "quote"]}, follow=True)
    assert StreamSubscription.objects.get(account=account, pair=btc).metrics == ["trade", "quote"]
    assert "Subscribed to binance/BTC/USDT (trade, quote)" in response.content.decode()
    signed_in.post("/account/streams/subscribe/", {"exchange": "binance", "base": "BTC", "quote": "USDT",
                                                  "metrics": ["book"]})
    assert StreamSubscription.objects.get(account=account, pair=btc).metrics == ["trade", "book", "quote"]


@pytest.mark.parametrize("form, message", [
    ({"exchange": "binance", "base": "NOPE", "quote": "USDT", "metrics": ["trade"]},
     "binance/NOPE/USDT is not a pair you can stream"),
    ({"exchange": "binance", "base": "BTC", "quote": "USDT"}, "Choose at least one metric"),
    ({"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["candles"]}, "candles is not one of"),
])
def test_subscribing_a_bad_choice_from_the_picker_says_why(signed_in, account, catalog, form, message):
    response = signed_in.post("/account/streams/subscribe/", form, follow=True)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not StreamSubscription.objects.filter(account=account).exists()


@pytest.mark.parametrize("plan, payment, message", [
    ("free", None, "does not include the streaming feature"),
    ("pro", "lapsed", "payment has lapsed"),
])
def test_the_picker_refuses_a_plan_without_streaming_or_a_lapsed_payment(make_account, catalog, plan, payment,
                                                                        message):
    account = make_account(plan=plan, payment=payment)
    client = Client()
    client.force_login(account.users.get())
    page = client.get("/account/streams/").content.decode()
    assert 'id="stream-refusal"' in page and message in page
    response = client.post("/account/streams/subscribe/", {"exchange": "binance", "base": "BTC", "quote": "USDT",
                                                          "metrics": ["trade"]}, follow=True)
    assert message in response.content.decode()
    assert not StreamSubscription.objects.filter(account=account).exists()


def test_the_picker_charge_is_the_bills_rule_for_the_days_left(account, btc, monkeypatch):
    from billing.selectors import subscribe_charges_month

    now = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)  # 10 days left of 30, today included
    charge = subscribe_charges_month(account=account, pair_ids=[btc.pk], now=now, pair_price_usd=30)[btc.pk]
    assert (charge.pair_days, charge.cost_usd) == (10, 10.0)
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 11, 19, 12, 0, tzinfo=timezone.utc))
    subscription_upsert(account=account, pair=btc, metrics=["trade"])
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 11, 21, 7, 0, tzinfo=timezone.utc))
    subscription_remove(account=account, pair=btc)  # Nov 19-21 billed already
    charge = subscribe_charges_month(account=account, pair_ids=[btc.pk], now=now, pair_price_usd=30)[btc.pk]
    assert (charge.pair_days, charge.cost_usd) == (9, 9.0)


def test_live_open_gives_no_token_for_another_account_s_subscription(signed_in, make_account, btc):
    subscription_upsert(account=make_account(), pair=btc, metrics=["trade"])
    body = signed_in.get("/account/live/binance/BTC/USDT/open/").json()
    assert body["refusal"]["details"]["reason"] == "not_subscribed" and "events_url" not in body
