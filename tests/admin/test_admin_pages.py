"""Every admin page as staff read it: titles name things (no raw ids), lists show dates
(no epoch ms), bytes and money are formatted, and the counted figures (billing periods,
usage counters) cannot be added, edited or deleted."""

import re

import pytest
from django.contrib import admin
from django.urls import reverse

from accounts.models import ApiKey, User
from accounts.services import api_key_create, api_key_revoke
from billing.models import KeyEndpointUsage, PairBillingPeriod, UsageCounter
from config import clock
from market.models import Asset, Pair
from market.services import catalog_seed_demo
from schemes.models import SchemeEvent
from streaming.models import IngestionState
from streaming.services import subscription_upsert

EPOCH_MS = re.compile(r"(?<![\d.])1[5-9]\d{11}(?![\d.])")  # 2017..2033 in epoch milliseconds
SUBTITLE = re.compile(r'<div id="content"[^>]*>\s*(?:<h1>[^<]*</h1>\s*)?<h2>([^<]*)</h2>', re.S)


@pytest.fixture
def staff(db, client):
    user = User.objects.create_superuser(email="staff@example.com", password="staff-password")
    client.force_login(user)
    return user


@pytest.fixture
def everything(staff, make_account, client_for):
    """At least one row of every model in admin, written the way the service writes them."""
    catalog_seed_demo()
    account = make_account(email="desk@acme.test")
    account.name = "Acme Quant Desk"
    account.save(update_fields=["name"])
    live = api_key_create(account=account, name="research notebook")
    gone = api_key_create(account=account, name="old laptop")
    api_key_revoke(api_key=gone.api_key, via=ApiKey.RevokedVia.ADMIN, by=staff)
    pair = Pair.objects.select_related("exchange", "base", "quote").get(
        exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
    subscription_upsert(account=account, pair=pair, metrics=["trade", "book"])
    served = client_for(live.plaintext).get("/api/v1/streams")
    assert served.status_code == 200
    now_ms = clock.now_ms()
    IngestionState.objects.update_or_create(pair=pair, defaults={"cursor_ms": now_ms, "coverage_from_ms": now_ms})
    SchemeEvent.objects.create(pair=pair, scheme="layering", direction="up", side="bid", ts_ms=now_ms,
                               build_start_ms=now_ms - 5000, after_bar_ms=now_ms - 1000, price=100.0,
                               confidence=0.5, alert_score=50.0)
    return account


def admin_urls():
    for model, model_admin in admin.site._registry.items():
        yield model, model_admin, f"admin:{model._meta.app_label}_{model._meta.model_name}"


def test_every_changelist_shows_dates_not_epoch_ms_and_every_change_page_title_names_its_object(
        client, everything):
    checked = 0
    for model, model_admin, name in admin_urls():
        listed = client.get(reverse(f"{name}_changelist"))
        assert listed.status_code == 200, name
        html = listed.content.decode()
        assert not EPOCH_MS.search(html), (name, EPOCH_MS.search(html))
        obj = model_admin.get_queryset(listed.wsgi_request).first()
        if obj is None:
            continue
        shown = client.get(reverse(f"{name}_change", args=[obj.pk]))
        assert shown.status_code == 200, name
        page = shown.content.decode()
        assert not EPOCH_MS.search(page), (name, EPOCH_MS.search(page))
        title = SUBTITLE.search(page).group(1).strip()
        assert title and not re.match(r"^\d+\b", title) and not re.search(rf"\b{obj.pk} \d", title), (name, title)
        assert not re.search(r"\bof \d+$", title), (name, title)
        checked += 1
    assert checked >= 10


def test_billing_periods_and_usage_counters_have_no_add_edit_or_delete(client, everything):
    for model in (PairBillingPeriod, UsageCounter, KeyEndpointUsage):
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        obj = model.objects.first()
        listed = client.get(reverse(f"{name}_changelist")).content.decode()
        assert "delete_selected" not in listed and reverse(f"{name}_add") not in listed
        page = client.get(reverse(f"{name}_change", args=[obj.pk])).content.decode()
        assert "deletelink" not in page and 'type="submit"' not in page.split('id="content"')[1], name
        assert client.get(reverse(f"{name}_delete", args=[obj.pk])).status_code == 403
        assert client.post(reverse(f"{name}_delete", args=[obj.pk]), {"post": "yes"}).status_code == 403
        assert client.get(reverse(f"{name}_add")).status_code == 403
        assert model.objects.filter(pk=obj.pk).exists()
    counter = UsageCounter.objects.get(period="month")
    before = (counter.requests, counter.bytes)
    client.post(reverse("admin:billing_usagecounter_change", args=[counter.pk]),
                {"requests": 0, "bytes": 0, "account": counter.account_id})
    counter.refresh_from_db()
    assert (counter.requests, counter.bytes) == before


def test_titles_name_the_account_and_the_month(client, everything):
    month = UsageCounter.objects.get(account=everything, period="month")
    period = PairBillingPeriod.objects.get(account=everything)
    today = clock.utcnow()
    assert str(month) == f"Acme Quant Desk / {today:%Y-%m}"
    assert str(period) == f"Acme Quant Desk / binance/BTC/USDT / {today:%Y-%m-%d} to open"
    page = client.get(reverse("admin:billing_pairbillingperiod_change", args=[period.pk])).content.decode()
    assert "Acme Quant Desk / binance/BTC/USDT" in page


def test_lists_format_bytes_money_and_counts(client, everything):
    plans = client.get(reverse("admin:billing_plan_changelist")).content.decode().replace("\xa0", " ")
    assert "50.0 GB" in plans and "$20.00" in plans and "1,000,000" in plans
    assets = client.get(reverse("admin:market_asset_changelist")).content.decode()
    btc = Asset.objects.get(symbol="BTC")
    assert f"${btc.market_cap_usd:,.2f}" in assets
    assert repr(btc.market_cap_usd) not in assets
    usage = client.get(reverse("admin:billing_keyendpointusage_changelist")).content.decode()
    assert "GET /api/v1/streams" in usage and "research notebook" in usage


def test_staff_find_accounts_keys_subscriptions_and_scheme_events_by_search_and_filter(client, everything):
    found = {
        "admin:accounts_account_changelist": ({"q": "desk@acme.test"}, "Acme Quant Desk"),
        "admin:accounts_apikey_changelist": ({"q": "old laptop", "revoked_via__exact": "admin"}, "by staff in admin"),
        "admin:streaming_streamsubscription_changelist": ({"q": "Acme", "pair__exchange__id__exact":
                                                           Pair.objects.get(exchange__slug="binance", base__symbol="BTC",
                                                                            quote__symbol="USDT").exchange_id},
                                                          "Acme Quant Desk"),
        "admin:schemes_schemeevent_changelist": ({"q": "BTC", "detected_within": "1h", "scheme__exact": "layering"},
                                                 "layering"),
    }
    for name, (query, expected) in found.items():
        page = client.get(reverse(name), query)
        assert page.status_code == 200, name
        html = page.content.decode()
        assert expected in html and "0 results" not in html, name
    older = client.get(reverse("admin:schemes_schemeevent_changelist"), {"q": "ETH"}).content.decode()
    assert "0 results" in older or "layering" not in older.split('id="result_list"')[-1]


def test_revoking_in_admin_records_staff_and_how(client, staff, everything):
    key = ApiKey.objects.get(account=everything, name="research notebook")
    done = client.post(reverse("admin:accounts_apikey_changelist"),
                       {"action": "revoke_selected", "_selected_action": [key.pk]})
    assert done.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None and key.revoked_via == "admin" and key.revoked_by == staff
