"""The plan page: the listed plans with features, quotas and prices, the account's plan and
payment standing, and the way to another plan: Stripe Checkout (its session creation
replaced at the stripe library's boundary: no test reaches Stripe), Stripe's billing portal
for a subscriber, or staff when no Stripe keys are configured."""

from types import SimpleNamespace

import pytest
import stripe
from django.test import Client
from stripe.billing_portal._session_service import SessionService as PortalSessions
from stripe.checkout._session_service import SessionService as CheckoutSessions

from billing.models import Plan, StripeCustomer
from billing.selectors import plans_public
from billing.services import plan_upsert

from .stripe_events import WEBHOOK_SECRET


@pytest.fixture
def stripe_keys(settings, plans):
    settings.STRIPE_SECRET_KEY = "sk_test_not_a_real_key"
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    for name in ("pro", "enterprise"):
        plans[name].stripe_price_id = f"price_test_{name}"
        plans[name].save()
    return plans


@pytest.fixture
def stripe_calls(monkeypatch):
    """The Checkout and portal sessions asked of the stripe library: their params."""
    calls = []

    def checkout(self, params=None, options=None):
        calls.append(("checkout", params))
        return SimpleNamespace(id="cs_test_1", url="https://checkout.stripe.test/c/pay/cs_test_1")

    def portal(self, params=None, options=None):
        calls.append(("portal", params))
        return SimpleNamespace(id="bps_test_1", url="https://billing.stripe.test/p/session/bps_test_1")

    monkeypatch.setattr(CheckoutSessions, "create", checkout)
    monkeypatch.setattr(PortalSessions, "create", portal)
    return calls


def web(account) -> Client:
    client = Client()
    client.force_login(account.users.get())
    return client


def test_the_plan_page_lists_the_plans_with_prices_quotas_features_and_the_current_standing(make_account):
    account = make_account(plan="free")
    response = web(account).get("/account/plan/")
    assert response.status_code == 200
    html = response.content.decode()
    assert [choice.plan.name for choice in response.context["standing"].choices] == ["free", "pro", "enterprise"]
    assert 'id="current-plan-name">Free<' in html and 'id="payment-standing"' in html and ">Active<" in html
    assert "$49" in html and "$990" in html and "$20 per pair a month" in html
    assert "1,000,000 requests a month" in html and "50 GiB of responses a month" in html
    assert "No live streams" in html and "Live streams, snapshots and spoofing detection" in html


def test_without_stripe_keys_the_page_says_upgrading_is_arranged_with_staff(make_account, plans):
    plans["pro"].stripe_price_id = "price_test_pro"
    plans["pro"].save()
    html = web(make_account(plan="free")).get("/account/plan/").content.decode()
    assert "arranged with our staff" in html
    assert "/account/plan/checkout/" not in html and "Upgrade to" not in html


def test_upgrading_sends_the_customer_to_stripe_checkout_for_the_plans_price(make_account, stripe_keys, stripe_calls):
    account = make_account(plan="free")
    client = web(account)
    html = client.get("/account/plan/").content.decode()
    assert "Upgrade to Pro" in html and "Upgrade to Enterprise" in html

    response = client.post("/account/plan/checkout/", {"plan": "pro"})
    assert response.status_code == 302
    assert response["Location"] == "https://checkout.stripe.test/c/pay/cs_test_1"
    (kind, params), = stripe_calls
    assert kind == "checkout" and params["mode"] == "subscription"
    assert params["line_items"] == [{"price": "price_test_pro", "quantity": 1}]
    assert params["client_reference_id"] == str(account.pk)
    assert params["metadata"] == {"account_id": str(account.pk), "plan": "pro"}
    assert params["customer_email"] == account.users.get().email
    assert params["success_url"] == "http://testserver/account/plan/?checkout=success"
    assert params["cancel_url"] == "http://testserver/account/plan/?checkout=cancelled"
    assert account.__class__.objects.get(pk=account.pk).plan.name == "free"  # until Stripe's webhook says so


def test_back_from_checkout_the_page_looks_again_until_stripe_confirms_then_says_so(make_account, settings):
    from billing.services import stripe_event_apply

    from .stripe_events import checkout_completed

    account = make_account(plan="free")
    client = web(account)
    html = client.get("/account/plan/?checkout=success").content.decode()
    assert "Stripe is confirming the payment" in html
    assert 'data-refresh-url="/account/plan/?checkout=success&amp;try=1"' in html
    assert 'data-refresh-url="/account/plan/?checkout=success&amp;try=8"' in \
        client.get("/account/plan/?checkout=success&try=7").content.decode()
    for odd in ("x", "-1", "99999999999", ""):
        assert client.get(f"/account/plan/?checkout=success&try={odd}").status_code == 200
    waited = client.get("/account/plan/?checkout=success&try=40").content.decode()
    assert "has not confirmed the payment yet" in waited and "data-refresh-url" not in waited

    stripe_event_apply(event=checkout_completed(account_id=account.pk, plan="pro"))
    done = client.get("/account/plan/?checkout=success&try=3").content.decode()
    assert "Payment confirmed: the account is on Pro." in done and "data-refresh-url" not in done
    assert "nothing was charged" in client.get("/account/plan/?checkout=cancelled").content.decode()


def test_when_stripe_cannot_start_the_checkout_the_page_says_so_and_nothing_changes(
        make_account, stripe_keys, monkeypatch):
    def unreachable(self, params=None, options=None):
        raise stripe.APIConnectionError("Network error: A ConnectError was raised")

    monkeypatch.setattr(CheckoutSessions, "create", unreachable)
    response = web(make_account(plan="free")).post("/account/plan/checkout/", {"plan": "pro"})
    assert response.status_code == 409
    assert "Stripe could not start the checkout, and nothing was charged" in response.content.decode()


@pytest.mark.parametrize(("posted", "message"), [
    ({}, "Choose a plan."), ({"plan": "platinum"}, "Choose one of the listed plans."),
    ({"plan": "unlisted"}, "Choose one of the listed plans."), ({"plan": "x" * 5000}, "Choose one of the listed plans."),
])
def test_a_plan_that_is_not_offered_is_a_form_error(make_account, stripe_keys, stripe_calls, posted, message):
    plan_upsert(name="unlisted", features=["api"])
    Plan.objects.filter(name="unlisted").update(is_public=False, stripe_price_id="price_test_unlisted")
    response = web(make_account(plan="free")).post("/account/plan/checkout/", posted)
    assert response.status_code == 400 and message in response.content.decode()
    assert stripe_calls == []


def test_buying_the_plan_the_account_is_on_is_refused_on_the_page(make_account, stripe_keys, stripe_calls):
    response = web(make_account(plan="pro")).post("/account/plan/checkout/", {"plan": "pro"})
    assert response.status_code == 409 and "already on pro" in response.content.decode()
    assert stripe_calls == []


def test_a_subscriber_switches_plan_and_updates_payment_in_stripes_billing_portal(
        make_account, stripe_keys, stripe_calls):
    account = make_account(plan="pro", payment="lapsed")
    StripeCustomer.objects.create(account=account, customer_id="cus_test_9", subscription_id="sub_test_9")
    client = web(account)
    html = client.get("/account/plan/").content.decode()
    assert "Update payment method" in html and "Switch to Enterprise" in html and "Upgrade to" not in html
    assert "402 payment_required" in html  # what the lapse means, on the page

    assert client.post("/account/plan/billing-portal/").status_code == 302
    assert client.post("/account/plan/billing-portal/", {"plan": "enterprise"})["Location"] == \
        "https://billing.stripe.test/p/session/bps_test_1"
    (_, plain), (_, switch) = stripe_calls[:2]
    assert plain == {"customer": "cus_test_9", "return_url": "http://testserver/account/plan/"}
    assert switch["flow_data"] == {"type": "subscription_update",
                                   "subscription_update": {"subscription": "sub_test_9"}}
    client.post("/account/plan/billing-portal/", {"plan": "free"})
    assert stripe_calls[-1][1]["flow_data"] == {"type": "subscription_cancel",
                                                "subscription_cancel": {"subscription": "sub_test_9"}}
    assert "Cancel subscription" in html
    refused = client.post("/account/plan/checkout/", {"plan": "enterprise"})  # not a second subscription
    assert refused.status_code == 409 and "billing portal" in refused.content.decode()


def test_the_billing_portal_of_an_account_stripe_does_not_know_is_refused_on_the_page(make_account, stripe_keys):
    response = web(make_account(plan="pro")).post("/account/plan/billing-portal/")
    assert response.status_code == 409 and "arranged with staff" in response.content.decode()


def test_plans_public_lists_the_listed_plans_cheapest_first(plans):
    plan_upsert(name="acme-custom", features=["api", "streaming"])
    Plan.objects.filter(name="acme-custom").update(is_public=False)
    assert [plan.name for plan in plans_public()] == ["free", "pro", "enterprise"]


def test_an_account_on_an_unlisted_plan_sees_it_as_its_own(make_account, plans):
    custom = plan_upsert(name="acme-custom", features=["api"])
    Plan.objects.filter(pk=custom.pk).update(is_public=False)
    account = make_account(plan="free")
    account.plan = custom
    account.save()
    choices = web(account).get("/account/plan/").context["standing"].choices
    assert [(c.plan.name, c.current) for c in choices][0] == ("acme-custom", True)


def test_the_plan_pages_need_sign_in(db):
    for url in ("/account/plan/", "/account/plan/checkout/", "/account/plan/billing-portal/"):
        response = Client().get(url)
        assert response.status_code in (302, 405)
    assert Client().get("/account/plan/")["Location"].startswith("/signin/")
