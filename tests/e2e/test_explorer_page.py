"""The API explorer in a real browser, at a phone's and a desktop's width: a signed-in
customer chooses a key without pasting it again, tries an operation with its example, reads
the code samples, finds the live feed described rather than tried, and has a way back to
the dashboard; the page loads with no console error, no failed request, no sideways scroll."""

import re

import pytest

from .page_checks import PageWatch, assert_fits

expect = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'").expect
pytestmark = [pytest.mark.e2e]
WIDTHS = [390, 1440]


def operation(page, method: str, path: str):
    return page.locator(f".opblock-{method}").filter(
        has=page.locator(".opblock-summary-path", has_text=re.compile(rf"^{re.escape(path)}$"))).first


@pytest.mark.parametrize("width", WIDTHS)
def test_a_signed_in_customer_chooses_a_key_tries_an_example_and_reads_the_samples(
        server, customer, customer_key, sign_in, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, server, customer)
    page.goto("about:blank")  # the dashboard's own requests end here, before the explorer's are watched
    watch = PageWatch(page)
    page.goto(f"{server}/api/v1/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)

    # the key: listed by name, pasted once, then kept by this tab
    choice = page.locator("#key-choice")
    expect(choice).to_contain_text("e2e setup key")
    choice.select_option(value=customer_key[9:21])
    expect(page.locator("#key-state")).to_contain_text("Paste this key once")
    page.locator("#key-paste").fill(customer_key)
    page.locator("#key-use").click()
    expect(page.locator("#key-state")).to_contain_text(f"Using {customer_key[:21]}")
    page.reload()
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    expect(page.locator("#key-state")).to_contain_text(f"Using {customer_key[:21]}")  # not pasted again
    expect(page.locator("#key-choice")).to_have_value(customer_key[9:21])
    assert customer_key not in page.content()

    # a required parameter's example is filled in: Try it out, Execute, 200
    rank = operation(page, "get", "/api/v1/rank/top")
    rank.locator(".opblock-summary-control").click()
    rank.get_by_role("button", name="Try it out").click()
    expect(rank.locator("input[placeholder='exchange']")).to_have_value("binance")
    rank.get_by_role("button", name="Execute").click()
    expect(rank.locator(".live-responses-table tr.response .response-col_status")).to_have_text("200", timeout=15_000)

    # code samples: curl, Python, JavaScript, each the request as it stands
    samples = rank.locator(".code-samples")
    expect(samples.locator(".code-samples__source")).to_contain_text("curl --fail-with-body -X GET")
    samples.get_by_role("tab", name="Python (httpx)").click()
    expect(samples.locator(".code-samples__source")).to_contain_text("import httpx")
    samples.get_by_role("tab", name="JavaScript (fetch, Node 18+)").click()
    expect(samples.locator(".code-samples__source")).to_contain_text("await fetch(")

    # the live feed: described with its samples, never tried
    feed = operation(page, "get", "/api/v1/streams/{exchange}/{base}/{quote}/events")
    feed.locator(".opblock-summary-control").click()
    expect(feed.locator(".no-try-it-out")).to_be_visible()
    expect(feed.get_by_role("button", name="Try it out")).to_have_count(0)
    expect(feed.locator(".code-samples").get_by_role("tab")).to_have_text(["curl", "Python (httpx)", "JavaScript (EventSource)"])

    # the destructive call is tried on a pair the customer's demo does not stream
    delete = operation(page, "delete", "/api/v1/streams/{exchange}/{base}/{quote}")
    delete.locator(".opblock-summary-control").click()
    expect(delete.locator(".code-samples__source")).to_contain_text("/api/v1/streams/kraken/ADA/USD")

    assert_fits(page)
    watch.assert_clean()

    page.locator("#back-to-dashboard").click()
    expect(page).not_to_have_url(re.compile("/api/v1/docs"))
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_signed_out_visitor_pastes_a_key_and_is_offered_the_way_in(server, customer_key, page, width):
    page.set_viewport_size({"width": width, "height": 900})
    watch = PageWatch(page)
    page.goto(f"{server}/api/v1/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    expect(page.locator("#key-choice")).to_have_count(0)
    expect(page.locator("#back-to-dashboard")).to_have_text("Sign in")
    page.locator("#key-paste").fill("mdp_live_not-a-key")
    page.locator("#key-use").click()
    expect(page.locator("#key-state")).to_contain_text("That is not an API key")
    page.locator("#key-paste").fill(customer_key)
    page.locator("#key-paste").press("Enter")
    expect(page.locator("#key-state")).to_contain_text(f"Using {customer_key[:21]}")
    usage = operation(page, "get", "/api/v1/me/usage")
    usage.locator(".opblock-summary-control").click()
    usage.get_by_role("button", name="Try it out").click()
    usage.get_by_role("button", name="Execute").click()
    expect(usage.locator(".live-responses-table tr.response .response-col_status")).to_have_text("200", timeout=15_000)
    assert_fits(page)
    watch.assert_clean()


def test_the_live_feed_s_event_source_sample_runs_in_a_browser(server, customer_key, api, page):
    assert api(server, customer_key).post("/api/v1/streams", json={
        "exchange": "binance", "base": "BTC", "quote": "USDT"}).status_code == 201
    page.goto(f"{server}/api/v1/docs")
    schema = page.evaluate("() => fetch('/api/v1/schema?format=json').then((r) => r.json())")
    sample = schema["paths"]["/api/v1/streams/{exchange}/{base}/{quote}/events"]["get"]["x-codeSamples"][2]
    status = page.evaluate("""async ([source, key]) => {
        const openFeed = new Function(`${source}; return openFeed;`)();
        const feed = await openFeed(key);
        return await new Promise((resolve, reject) => {
            feed.addEventListener("status", (e) => { feed.close(); resolve(JSON.parse(e.data)); });
            setTimeout(() => reject(new Error("no status event in 15 s")), 15000);
        });
    }""", [sample["source"], customer_key])
    assert status["subscribed"] is True and status["base"] == "BTC"


def test_a_key_created_on_the_keys_page_is_used_by_the_explorer_without_a_paste(server, customer, sign_in, page):
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in(page, server, customer)
    page.goto(f"{server}/account/keys/")
    page.get_by_label("Name", exact=True).fill("explorer key")
    page.get_by_role("button", name="Create key").click()
    plaintext = page.locator("#plaintext-key").inner_text().strip()
    page.goto(f"{server}/api/v1/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    page.locator("#key-choice").select_option(value=plaintext[9:21])
    expect(page.locator("#key-state")).to_contain_text(f"Using {plaintext[:21]}")  # never pasted
