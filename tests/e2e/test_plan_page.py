"""The plan page in a real browser, at a phone's and a desktop's width: a free customer
upgrades through Stripe Checkout (a local stand-in for Stripe's API and hosted page,
tests/billing/stripe_stub.py), Stripe's webhook arrives signed with the webhook secret as
Stripe signs it, and the page shows the new plan and standing; then a failed renewal lapses
it and a paid invoice makes it active again."""

import uuid

import httpx
import pytest

from tests.billing.stripe_events import WEBHOOK_PATH, WEBHOOK_SECRET, checkout_completed, invoice, signed
from tests.billing.stripe_stub import stripe_stub
from tests.integration.servers import daphne_processes

from .conftest import PASSWORD, SETTINGS_MODULE, Customer, _server_env
from .page_checks import PageWatch, assert_fits

expect = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'").expect
pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def stripe():
    with stripe_stub() as stub:
        yield stub


@pytest.fixture(scope="module")
def stripe_server(_server_database, stripe) -> str:
    """A daphne process with Stripe keys, its API pointed at the local stand-in."""
    url, _ = _server_database
    env = {**_server_env(url, ingest=False), "STRIPE_SECRET_KEY": "sk_test_local_stub",
           "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET, "STRIPE_API_BASE": stripe.base}
    with daphne_processes(1, env=env, settings_module=SETTINGS_MODULE) as (base,):
        yield base


@pytest.fixture
def free_customer(server_db) -> Customer:
    """A customer on the free plan; Pro and Enterprise sold through Stripe prices."""
    from accounts.services import account_upsert
    from billing.models import Plan
    from billing.services import plans_seed_defaults

    email = f"e2e-plan-{uuid.uuid4().hex[:10]}@example.com"
    with server_db.orm():
        plans = {plan.name: plan for plan in plans_seed_defaults()}
        for name in ("pro", "enterprise"):
            Plan.objects.filter(pk=plans[name].pk).update(stripe_price_id=f"price_test_{name}")
        user = account_upsert(email=email, plan=plans["free"], password=PASSWORD, account_name="E2E Plan Desk")
    return Customer(email=email, password=PASSWORD, account_id=user.account_id)


def post_webhook(base: str, stripe_event: dict) -> dict:
    body, headers = signed(stripe_event)
    response = httpx.post(f"{base}{WEBHOOK_PATH}", content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("width", [390, 1440])
def test_a_customer_upgrades_through_stripe_checkout_and_the_signed_webhook_shows_on_the_plan_page(
        stripe_server, stripe, free_customer, sign_in, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    watch = PageWatch(page)
    sign_in(page, stripe_server, free_customer)
    page.goto(f"{stripe_server}/account/plan/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Plan and payment")
    expect(page.locator("#current-plan-name")).to_have_text("Free")
    expect(page.locator("#payment-standing")).to_have_text("Active")
    expect(page.locator('[data-plan="pro"]')).to_contain_text("$49")
    expect(page.locator('[data-plan="pro"]')).to_contain_text("1,000,000 requests a month")
    expect(page.locator('[data-plan="free"]')).to_contain_text("Your plan")
    assert_fits(page)

    page.get_by_role("button", name="Upgrade to Pro").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Stripe test checkout")  # Stripe's hosted page
    session_id = page.url.rsplit("/", 1)[-1]
    asked = stripe.sessions[session_id]
    assert asked["line_items[0][price]"] == "price_test_pro" and asked["mode"] == "subscription"
    assert asked["client_reference_id"] == str(free_customer.account_id)
    page.locator("#pay").click()
    expect(page).to_have_url(f"{stripe_server}/account/plan/?checkout=success")
    expect(page.locator("#checkout-notice")).to_contain_text("Stripe is confirming the payment")
    expect(page.locator("#current-plan-name")).to_have_text("Free")  # nothing before Stripe's webhook

    customer, subscription = f"cus_e2e{width}", f"sub_e2e{width}"
    done = post_webhook(stripe_server, checkout_completed(account_id=int(asked["client_reference_id"]),
                                                         plan=asked["metadata[plan]"], customer=customer,
                                                         subscription=subscription))
    assert done["outcome"].startswith("plan pro")
    # the page looks again by itself until Stripe has confirmed
    expect(page.locator("#current-plan-name")).to_have_text("Pro", timeout=15_000)
    expect(page.locator("#checkout-notice")).to_have_text("Payment confirmed: the account is on Pro.")
    expect(page.locator("#payment-standing")).to_have_text("Active")
    expect(page.locator("#payment-events")).to_contain_text("checkout.session.completed")
    expect(page.get_by_role("button", name="Switch to Enterprise")).to_be_visible()
    expect(page.get_by_role("button", name="Payment method and invoices")).to_be_visible()
    assert_fits(page)

    post_webhook(stripe_server, invoice("invoice.payment_failed", customer=customer, subscription=subscription))
    page.reload()
    expect(page.locator("#payment-standing")).to_have_text("Lapsed")
    expect(page.locator("#lapsed-notice")).to_contain_text("402 payment_required")
    expect(page.get_by_role("button", name="Update payment method")).to_be_visible()
    assert_fits(page)

    post_webhook(stripe_server, invoice("invoice.paid", customer=customer, subscription=subscription))
    page.reload()
    expect(page.locator("#payment-standing")).to_have_text("Active")
    expect(page.locator("#current-plan-name")).to_have_text("Pro")
    assert_fits(page)
    watch.assert_clean()


@pytest.mark.parametrize("width", [390, 1440])
def test_without_stripe_keys_the_plan_page_says_plans_are_arranged_with_staff(
        server, customer, sign_in, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    watch = PageWatch(page)
    sign_in(page, server, customer)
    page.get_by_role("link", name="Plan", exact=True).click()
    expect(page).to_have_url(f"{server}/account/plan/")
    expect(page.locator("#current-plan-name")).to_have_text("Pro")
    expect(page.locator("#staff-arranged")).to_contain_text("arranged with our staff")
    expect(page.get_by_role("button", name="Upgrade to Enterprise")).to_have_count(0)
    expect(page.locator('[data-plan="enterprise"]')).to_contain_text("Arranged with our staff")
    assert_fits(page)
    watch.assert_clean()
