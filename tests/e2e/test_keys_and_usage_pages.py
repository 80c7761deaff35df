"""The keys and usage pages in a real browser at a phone's width (390 px) and a desktop's
(1440 px): create, rename and revoke a key and find it in the history, greyed, with when
and how it was revoked; the usage page's tables per key and per endpoint. Every page: no
console error, no failed request, no sideways scroll, every action inside its card."""

import re

import pytest

from .page_checks import assert_settled_page_is_clean, at_width

expect = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'").expect
pytestmark = [pytest.mark.e2e]
WIDTHS = [390, 1440]
STATUS = "GET /api/v1/streams/{exchange}/{base}/{quote}/status"


@pytest.mark.parametrize("width", WIDTHS)
def test_create_rename_and_revoke_a_key_then_find_it_greyed_in_the_history(
        width, server, customer, server_db, api, sign_in, page):
    from accounts.models import ApiKey

    watched = at_width(page, width)
    sign_in(page, server, customer)
    assert_settled_page_is_clean(page, watched)
    page.get_by_label("Name", exact=True).fill("laptop notebook")
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#created-key")).to_be_visible()
    plaintext = page.locator("#plaintext-key").inner_text().strip()
    assert_settled_page_is_clean(page, watched)

    page.locator("#key-list").get_by_role("link", name="Rename…").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(server)}/account/keys/\d+/rename/$"))
    expect(page.get_by_label("New name")).to_have_value("laptop notebook")
    assert_settled_page_is_clean(page, watched)
    page.get_by_label("New name").fill("   ")
    page.locator("#confirm-rename").click()
    expect(page.locator(".field-error")).to_contain_text("required")
    page.get_by_label("New name").fill("trading desk")
    page.locator("#confirm-rename").click()
    expect(page).to_have_url(f"{server}/account/keys/")
    expect(page.locator(".messages")).to_contain_text("to “trading desk”")
    expect(page.locator("#key-list tbody tr")).to_have_count(1)
    expect(page.locator("#key-list")).to_contain_text("trading desk")
    assert api(server, plaintext).get("/api/v1/me/usage").status_code == 200  # same key, new name
    assert_settled_page_is_clean(page, watched)

    page.locator("#key-list").get_by_role("link", name="Revoke…").click()
    assert_settled_page_is_clean(page, watched)
    page.locator("#confirm-revoke").click()
    expect(page).to_have_url(f"{server}/account/keys/")
    expect(page.locator("#key-list")).to_have_count(0)
    history = page.locator("#revoked-key-list tbody tr.revoked-key")
    expect(history).to_have_count(1)
    expect(history.first).to_contain_text("trading desk")
    expect(history.first).to_contain_text(plaintext[:21] + "…")
    expect(history.first).to_contain_text(f"by {customer.email} on the API keys page")
    with server_db.orm():
        key = ApiKey.objects.get(account_id=customer.account_id)
    assert key.revoked_via == "page"
    expect(history.first).to_contain_text(f"{key.revoked_at:%Y-%m-%d %H:%M} UTC")
    grey = history.first.locator("td").first.evaluate("cell => getComputedStyle(cell).color")
    assert grey == "rgb(93, 109, 126)", grey  # the muted ink, not the page's
    assert api(server, plaintext).get("/api/v1/me/usage").status_code == 401
    assert_settled_page_is_clean(page, watched)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_usage_page_and_me_usage_show_the_month_per_key_and_per_endpoint(
        width, server, customer, customer_key, server_db, api, sign_in, page):
    from accounts.models import Account
    from accounts.services import api_key_create

    with server_db.orm():
        second = api_key_create(account=Account.objects.get(pk=customer.account_id), name="backtests").plaintext
    setup, backtests = api(server, customer_key), api(server, second)
    for _ in range(3):
        assert setup.get("/api/v1/streams").status_code == 200
    for path in ("binance/BTC/USDT", "coinbase/ETH/USD"):  # not subscribed: the endpoint's own 402, counted
        assert backtests.get(f"/api/v1/streams/{path}/status").status_code == 402
    usage = backtests.get("/api/v1/me/usage").json()
    lines = {(line["key_name"], line["endpoint"]): line["requests"] for line in usage["by_key_and_endpoint"]}
    assert lines == {("e2e setup key", "GET /api/v1/streams"): 3, ("backtests", STATUS): 2}
    assert sum(line["bytes"] for line in usage["by_key_and_endpoint"]) == usage["bytes"]["used"]

    watched = at_width(page, width)
    sign_in(page, server, customer)
    page.get_by_role("link", name="Usage").click()
    expect(page).to_have_url(f"{server}/account/usage/")
    by_key = page.locator("#usage-by-key-table tbody tr")
    expect(by_key).to_have_count(2)
    expect(by_key.nth(0)).to_contain_text("e2e setup key")
    expect(by_key.nth(0)).to_contain_text("3")
    expect(by_key.nth(1)).to_contain_text("backtests")
    by_endpoint = page.locator("#usage-by-endpoint-table tbody tr")
    expect(by_endpoint).to_have_count(2)
    expect(by_endpoint.nth(0)).to_contain_text("GET /api/v1/streams")
    expect(by_endpoint.nth(1)).to_contain_text(STATUS)
    assert_settled_page_is_clean(page, watched)


ADMIN_PAGES = ["billing/pairbillingperiod", "billing/usagecounter", "billing/keyendpointusage", "accounts/apikey",
               "accounts/account", "streaming/streamsubscription", "schemes/schemeevent", "market/asset"]


@pytest.mark.parametrize("width", WIDTHS)
def test_staff_read_names_dates_and_formatted_figures_in_admin_with_no_delete_on_counted_figures(
        width, server, customer, customer_key, server_db, api, page):
    import uuid

    from accounts.models import Account, User
    from market.models import Pair
    from streaming.services import subscription_upsert

    email = f"staff-{uuid.uuid4().hex[:8]}@example.com"
    with server_db.orm():
        User.objects.create_superuser(email=email, password="staff-password")
        pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
        subscription_upsert(account=Account.objects.get(pk=customer.account_id), pair=pair, metrics=["trade"])
    assert api(server, customer_key).get("/api/v1/streams").status_code == 200

    watched = at_width(page, width)
    page.goto(f"{server}/admin/login/")
    page.locator("#id_username").fill(email)
    page.locator("#id_password").fill("staff-password")
    page.locator("input[type=submit]").click()
    expect(page).to_have_url(f"{server}/admin/")
    for path in ADMIN_PAGES:
        page.goto(f"{server}/admin/{path}/?q=E2E+Quant+Desk" if path == "accounts/account" else f"{server}/admin/{path}/",
                  wait_until="load")
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner, (path, scroll, inner)
        body = page.locator("#content").inner_text()
        assert not re.search(r"(?<![\d.])1[5-9]\d{11}(?![\d.])", body), (path, body[:500])
        if path.startswith("billing/") and path != "billing/plan":
            expect(page.locator("option[value=delete_selected]")).to_have_count(0)
            expect(page.locator("#content .object-tools a.addlink")).to_have_count(0)
    page.goto(f"{server}/admin/billing/pairbillingperiod/")
    page.locator("#result_list tbody tr th a, #result_list tbody tr td a").filter(
        has_text="E2E Quant Desk / binance/BTC/USDT").first.click()
    expect(page.locator("#content h2").first).to_contain_text("E2E Quant Desk / binance/BTC/USDT / ")
    expect(page.locator("a.deletelink")).to_have_count(0)
    page.goto(f"{server}/admin/billing/usagecounter/?q=E2E+Quant+Desk&period__exact=month")
    page.locator("#result_list tbody tr a").first.click()
    expect(page.locator("#content h2").first).to_have_text(re.compile(r"^E2E Quant Desk / \d{4}-\d{2}$"))
    expect(page.locator("a.deletelink")).to_have_count(0)
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner
    watched.assert_clean()
