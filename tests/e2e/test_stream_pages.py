"""The streaming pages in a real browser: the subscriptions list and the Live page, which
takes a session-issued stream token and draws the bars its EventSource receives."""

import re

import pytest

expect = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'").expect
pytestmark = [pytest.mark.e2e]
PAIR = {"exchange": "binance", "base": "BTC", "quote": "USDT"}
STATES = re.compile(r"^(REQUESTED|WARMING|READY|STALE|FAILED)$")


def subscribe(client) -> dict:
    created = client.post("/api/v1/streams", json=PAIR)
    assert created.status_code == 201, created.text
    return created.json()


def test_the_streams_page_lists_a_subscription_made_through_the_api(
        server, customer, customer_key, api, sign_in, page):
    subscription = subscribe(api(server, customer_key))

    sign_in(page, server, customer)
    page.get_by_role("link", name="Streams").click()
    expect(page).to_have_url(f"{server}/account/streams/")
    rows = page.locator("#subscriptions tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("binance/BTC/USDT")
    expect(rows.first).to_contain_text("simulated")
    expect(rows.first).to_contain_text(", ".join(subscription["metrics"]))
    expect(rows.first.locator(".state")).to_have_text(STATES)
    expect(rows.first.get_by_role("button", name="Unsubscribe")).to_be_visible()
    expect(page.locator("#billing")).to_contain_text("binance/BTC/USDT")


def test_the_live_page_draws_bars_it_receives_over_server_sent_events(
        ingesting_server, customer, customer_key, api, sign_in, page):
    subscribe(api(ingesting_server, customer_key))

    sign_in(page, ingesting_server, customer)
    with page.expect_response(re.compile(r"/account/live/\d+/token/$")) as token:
        page.get_by_role("link", name="Live").click()
    assert token.value.ok and "?token=" in token.value.json()["events_url"]
    expect(page.locator("#pair-select")).to_contain_text("binance/BTC/USDT")

    # live.js counts the `bar` events of its EventSource; the chart needs two points.
    expect(page.locator("#live-count")).to_have_text(re.compile(r"^([2-9]|[1-9]\d+) bars$"), timeout=90_000)
    latest = page.locator("#live-latest")
    expect(latest).to_contain_text("ts_ms")
    expect(latest).to_contain_text("close")
    expect(page.locator("#live-state")).to_have_text(STATES)
    drawn = page.evaluate("""() => {
        const canvas = document.getElementById("live-chart");
        const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        return pixels.some((value) => value !== 0);
    }""")
    assert drawn, "the price chart is blank"


OPEN_STREAMS = """
(() => {
  const Original = window.EventSource;
  window.__feeds = [];
  window.EventSource = function (url, options) {
    const feed = new Original(url, options);
    window.__feeds.push(feed);
    return feed;
  };
  window.EventSource.prototype = Original.prototype;
  window.EventSource.CONNECTING = 0; window.EventSource.OPEN = 1; window.EventSource.CLOSED = 2;
})();
"""


def test_changing_the_pair_quickly_leaves_only_the_new_pair_s_stream_open(
        server, customer, customer_key, api, sign_in, page):
    client = api(server, customer_key)
    subscribe(client)
    assert client.post("/api/v1/streams", json={**PAIR, "base": "ETH"}).status_code == 201
    page.add_init_script(OPEN_STREAMS)
    sign_in(page, server, customer)
    page.get_by_role("link", name="Live").click()
    select = page.locator("#pair-select")
    select.focus()
    for key in ("ArrowDown", "ArrowUp", "ArrowDown"):  # three pairs asked for at once, right after load
        page.keyboard.press(key)
    chosen = select.evaluate("(el) => el.options[el.selectedIndex].text")
    path = chosen.split()[0]
    page.wait_for_function("() => window.__feeds.length > 0 && window.__feeds.some((f) => f.readyState !== 2)")
    page.wait_for_timeout(1500)  # any late token answer has come back by now
    open_urls = page.evaluate("() => window.__feeds.filter((f) => f.readyState !== 2).map((f) => f.url)")
    assert len(open_urls) == 1 and f"/streams/{path}/events" in open_urls[0], (chosen, open_urls)


def test_the_live_page_shows_the_last_hour_s_scheme_events_and_the_reason_a_stream_is_refused(
        server, server_db, customer, customer_key, api, sign_in, page):
    import time

    from accounts.models import Account
    from accounts.services import account_payment_set
    from market.models import Pair
    from schemes.services import scheme_events_store

    subscribe(api(server, customer_key))
    now = int(time.time() * 1000)
    with server_db.orm():
        pair = Pair.objects.get(exchange__slug="binance", base__symbol="BTC", quote__symbol="USDT")
        scheme_events_store(pair=pair, detections=[{
            "scheme": "layering", "side": "ask", "direction": "down", "ts_ms": now - 600_000, "price": 60000.0,
            "confidence": 0.8, "alert_score": 70.0, "build": {"start_ms": now - 620_000}, "collapse": {}}])
    sign_in(page, server, customer)
    page.get_by_role("link", name="Live").click()
    rows = page.locator("#scheme-events tbody tr")
    expect(rows.first).to_contain_text("layering")
    expect(rows.first).to_contain_text("down")

    with server_db.orm():
        account_payment_set(account=Account.objects.get(pk=customer.account_id), payment=Account.Payment.LAPSED)
    page.reload()
    expect(page.locator("#live-state")).to_contain_text("payment has lapsed")
