"""The account pages in a real browser: sign-in, API keys (create once, revoke with a
confirmation) and usage."""

import calendar
import re
from datetime import datetime, timezone

import pytest

expect = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'").expect
pytestmark = [pytest.mark.e2e]
KEY = re.compile(r"mdp_live_[0-9A-Za-z]{50}")


def create_key_on_page(page, name: str) -> str:
    """Create a key with the form on the API keys page; returns the plaintext it shows."""
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#created-key")).to_be_visible()
    return page.locator("#plaintext-key").inner_text().strip()


def test_signing_in_with_email_and_password_lands_on_the_api_keys_page(server, customer, page):
    page.goto(f"{server}/")
    page.locator("header").get_by_role("link", name="Sign in").click()
    expect(page).to_have_url(f"{server}/signin/")
    page.get_by_label("Email").fill(customer.email)
    page.get_by_label("Password").fill(customer.password)
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(f"{server}/account/keys/")
    expect(page.get_by_role("heading", level=1)).to_have_text("API keys")
    expect(page.locator("main")).to_contain_text("E2E Quant Desk")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_role("link", name="API keys")).to_have_attribute("aria-current", "page")


def test_a_created_key_is_shown_exactly_once_and_a_reload_neither_shows_it_nor_creates_another(
        server, customer, server_db, api, sign_in, page):
    from accounts.models import ApiKey

    sign_in(page, server, customer)
    plaintext = create_key_on_page(page, "research notebook")

    assert KEY.fullmatch(plaintext), plaintext
    assert page.content().count(plaintext) == 1
    rows = page.locator("#key-list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("research notebook")
    expect(rows.first).to_contain_text(plaintext[:21] + "…")  # mdp_live_ + the lookup id
    assert api(server, plaintext).get("/api/v1/me/usage").status_code == 200  # the shown key works

    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text("API keys")
    expect(page.locator("#created-key")).to_have_count(0)
    assert plaintext not in page.content()
    expect(page.get_by_role("alert")).to_have_count(0)  # a plain list, not a refused resubmission
    expect(rows).to_have_count(1)
    with server_db.orm():
        assert ApiKey.objects.filter(account_id=customer.account_id).count() == 1


def test_revoking_a_key_takes_a_confirmation_then_the_key_is_gone_and_refused(
        server, customer, server_db, api, sign_in, page):
    from accounts.models import ApiKey

    sign_in(page, server, customer)
    plaintext = create_key_on_page(page, "to be revoked")
    client = api(server, plaintext)
    assert client.get("/api/v1/me/usage").status_code == 200

    page.locator("#key-list").get_by_role("link", name="Revoke…").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(server)}/account/keys/\d+/revoke/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Revoke “to be revoked”?")
    expect(page.locator("main")).to_contain_text(plaintext[:21] + "…")
    assert client.get("/api/v1/me/usage").status_code == 200  # nothing happens before confirming

    page.locator("#confirm-revoke").click()
    expect(page).to_have_url(f"{server}/account/keys/")
    expect(page.locator(".messages")).to_contain_text("“to be revoked”")
    expect(page.locator(".messages")).to_contain_text("is revoked")
    expect(page.locator("#key-list")).to_have_count(0)
    expect(page.get_by_text("No keys yet.")).to_be_visible()
    refused = client.get("/api/v1/me/usage")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    with server_db.orm():
        key = ApiKey.objects.get(account_id=customer.account_id)
        assert key.revoked_at is not None


def test_the_usage_page_shows_the_months_counts_and_a_chart_bar_per_day(
        server, customer, customer_key, api, sign_in, page):
    client = api(server, customer_key)
    for _ in range(3):
        response = client.get("/api/v1/streams")  # counted
        assert response.status_code == 200, response.text
    used = int(response.headers["X-Quota-Requests-Used"])
    assert used >= 3

    sign_in(page, server, customer)
    page.get_by_role("link", name="Usage").click()
    expect(page).to_have_url(f"{server}/account/usage/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage this month")
    expect(page.locator("#requests-meter strong")).to_have_text(f"{used:,}")

    chart = page.get_by_role("img", name="Requests per day this month")
    expect(chart).to_be_visible()
    today = datetime.now(timezone.utc).date()
    bars = chart.locator("rect.col")
    expect(bars).to_have_count(calendar.monthrange(today.year, today.month)[1])
    todays = bars.filter(has=page.locator("title", has_text=f"{today:%Y-%m-%d}: {used:,} requests"))
    expect(todays).to_have_count(1)
    assert float(todays.get_attribute("height")) > 0
