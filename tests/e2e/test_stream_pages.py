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
