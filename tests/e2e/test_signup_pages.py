"""The way in without staff, in a real browser on a running server, at a phone's width
(390 px) and a desktop's (1440 px): the landing page, sign-up with the link read from the
e-mail the server wrote (file e-mail backend), sign-in, password reset, sign-out with its
notice. Every page on the way: no console error, no failed request, no sideways scroll,
every action inside its card; a screenshot per page under build/e2e/."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.integration.servers import daphne_processes

from .conftest import SCREENSHOTS, SETTINGS_MODULE, _server_env
from .page_checks import assert_fits, at_width

expect = pytest.importorskip("playwright.sync_api", reason="needs playwright: pip install -e '.[dev]'").expect
pytestmark = [pytest.mark.e2e]
WIDTHS = [390, 1440]
NEW_PASSWORD = "a fresh passphrase 2026"
CONFIRM_LINK = re.compile(r"https?://\S+/signup/confirm/\S+/\S+/")
RESET_LINK = re.compile(r"https?://\S+/password/reset/\S+/\S+/")


@pytest.fixture(scope="module")
def mailbox(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e2e-mail")


@pytest.fixture(scope="module")
def mail_server(_server_database, mailbox) -> str:
    """A daphne process that writes every e-mail into `mailbox` (EMAIL_URL filemail)."""
    url, _ = _server_database
    env = {**_server_env(url, ingest=False), "EMAIL_URL": f"filemail:///{mailbox}"}
    with daphne_processes(1, env=env, settings_module=SETTINGS_MODULE) as (base,):
        yield base


@pytest.fixture
def seeded_plans(server_db) -> None:
    """The seeded plans in the server's database, as `make run` has them."""
    from billing.services import plans_seed_defaults

    with server_db.orm():
        plans_seed_defaults()


def e_mail_to(mailbox: Path, address: str, subject: str, *, within: float = 15.0) -> str:
    """The newest e-mail to `address` with `subject` the server wrote into the mailbox."""
    deadline = time.monotonic() + within
    while True:
        found = [part for path in sorted(mailbox.iterdir(), key=lambda p: p.stat().st_mtime)
                 for part in path.read_text().split("-" * 79)
                 if f"To: {address}" in part and subject in part]
        if found:
            return found[-1]
        assert time.monotonic() < deadline, f"no e-mail {subject!r} to {address} in {mailbox}"
        time.sleep(0.2)


class Watch:
    """A page watched at one width, with a screenshot of each step (var/screenshots)."""

    def __init__(self, page, name: str, width: int):
        self.page, self.name, self.width = page, name, width
        self.watch = at_width(page, width)

    def clean(self, step: str) -> None:
        page = self.page
        page.wait_for_load_state("load")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{self.name}-{self.width}-{step}.png"), full_page=True)
        self.watch.assert_clean(step)
        assert_fits(page, f"{step} at {self.width} px:")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_visitor_signs_up_confirms_by_the_e_mailed_link_and_signs_in(mail_server, mailbox, seeded_plans, page,
                                                                      width):
    watch = Watch(page, "signup", width)
    email = f"newcomer-{uuid.uuid4().hex[:8]}@example.com"
    page.goto(f"{mail_server}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Crypto market data, as an API")
    expect(page.locator("article.plan")).to_have_count(3)
    expect(page.locator("article.plan[data-plan=free]")).to_contain_text("Free")
    watch.clean("landing")

    page.get_by_role("link", name="Sign up free").click()
    expect(page).to_have_url(f"{mail_server}/signup/")
    watch.clean("form")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Team or company (optional)").fill("Newcomer Research")
    page.get_by_label("Password", exact=True).fill("short")
    page.get_by_label("Password confirmation").fill("short")
    page.get_by_role("button", name="Sign up").click()
    expect(page.locator(".field-error")).to_contain_text("too short")
    watch.clean("weak-password")
    page.get_by_label("Password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Password confirmation").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    expect(page).to_have_url(f"{mail_server}/signup/sent/")
    expect(page.locator("#signup-sent")).to_contain_text(email)
    watch.clean("sent")

    page.goto(f"{mail_server}/signin/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Confirm your e-mail address first")
    watch.clean("unconfirmed")

    link = CONFIRM_LINK.search(e_mail_to(mailbox, email, "Confirm your e-mail address")).group(0)
    page.goto(link)
    expect(page).to_have_url(f"{mail_server}/signin/")
    expect(page.locator(".messages")).to_contain_text("Your e-mail address is confirmed")
    watch.clean("confirmed")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{mail_server}/account/keys/")
    expect(page.locator("main")).to_contain_text("Newcomer Research")
    expect(page.locator("main")).to_contain_text("plan free")

    page.goto(link)  # a second use
    expect(page).to_have_url(f"{mail_server}/account/keys/")  # signed in: the link changes nothing


@pytest.mark.parametrize("width", WIDTHS)
def test_a_customer_resets_a_forgotten_password_by_the_e_mailed_link(mail_server, mailbox, customer, page, width):
    watch = Watch(page, "reset", width)
    page.goto(f"{mail_server}/signin/")
    page.get_by_role("link", name="Forgot your password?").click()
    expect(page).to_have_url(f"{mail_server}/password/reset/")
    watch.clean("form")
    page.get_by_label("Email").fill(customer.email.upper())
    page.get_by_role("button", name="Send the link").click()
    expect(page).to_have_url(f"{mail_server}/password/reset/sent/")
    watch.clean("sent")

    link = RESET_LINK.search(e_mail_to(mailbox, customer.email, "Reset your")).group(0)
    page.goto(link)
    expect(page.get_by_role("heading", level=1)).to_have_text("Choose a new password")
    watch.clean("choose")
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Set the password").click()
    expect(page).to_have_url(f"{mail_server}/password/reset/done/")
    watch.clean("done")

    page.get_by_role("link", name="Sign in").last.click()
    page.get_by_label("Email").fill(customer.email)
    page.get_by_label("Password").fill(customer.password)  # the old one
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("correct email and password")
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{mail_server}/account/keys/")

    page.goto(link)  # used: says so
    expect(page.locator("#reset-link-invalid")).to_be_visible()


@pytest.mark.parametrize("width", WIDTHS)
def test_signing_out_asks_on_a_typed_url_and_lands_on_a_notice(mail_server, customer, sign_in, page, width):
    watch = Watch(page, "signout", width)
    sign_in(page, mail_server, customer)
    page.goto(f"{mail_server}/signout/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign out?")
    watch.clean("confirm")
    page.locator("#confirm-signout").click()
    expect(page).to_have_url(f"{mail_server}/signin/")
    expect(page.locator(".messages")).to_have_text("You are signed out.")
    watch.clean("notice")

    sign_in(page, mail_server, customer)
    page.locator("header").get_by_role("button", name="Sign out").click()  # the top bar's button
    expect(page.locator(".messages")).to_have_text("You are signed out.")
    page.goto(f"{mail_server}/account/keys/")
    expect(page).to_have_url(re.compile(rf"^{re.escape(mail_server)}/signin/"))


def test_the_favicon_answers_at_the_root_and_as_linked(mail_server, page):
    assert httpx.get(f"{mail_server}/favicon.ico").status_code == 200
    page.goto(f"{mail_server}/")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert httpx.get(f"{mail_server}{icon}").headers["content-type"].startswith("image/svg+xml")


def _post_form(client: httpx.Client, path: str, data: dict) -> httpx.Response:
    """A form submission as a browser makes it: the CSRF token from the form's page."""
    page = client.get(path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return client.post(path, data={"csrfmiddlewaretoken": token, **data},
                       headers={"Referer": f"{client.base_url}{path}"})


def test_a_running_server_never_tells_which_addresses_have_accounts_and_throttles_e_mails(
        mail_server, mailbox, customer, settings):
    """Sign-up and reset answer a registered address exactly as an unknown one (the owner
    gets an e-mail saying so instead), and both stop sending after their limits."""
    unknown = f"unknown-{uuid.uuid4().hex[:8]}@example.com"
    answers = {}
    for email in (customer.email, unknown):
        with httpx.Client(base_url=mail_server, timeout=30) as client:
            signup = _post_form(client, "/signup/", {"email": email, "password1": NEW_PASSWORD,
                                                     "password2": NEW_PASSWORD})
            reset = _post_form(client, "/password/reset/", {"email": email})
            answers[email] = (signup.status_code, signup.headers["location"], reset.status_code,
                              reset.headers["location"])
    assert answers[customer.email] == answers[unknown] == (302, "/signup/sent/", 302, "/password/reset/sent/")
    assert "already has an account" in " ".join(e_mail_to(mailbox, customer.email, "You already have").split())
    assert RESET_LINK.search(e_mail_to(mailbox, customer.email, "Reset your"))

    with httpx.Client(base_url=mail_server, timeout=30) as client:
        for _ in range(settings.PASSWORD_RESET_LIMIT - 1):  # one was sent above
            assert _post_form(client, "/password/reset/", {"email": unknown}).status_code == 302
        refused = _post_form(client, "/password/reset/", {"email": unknown})
        assert refused.status_code == 200 and "Too many password resets" in refused.text
        for _ in range(settings.SIGNUP_LIMIT - 1):
            assert _post_form(client, "/signup/resend/", {"email": unknown}).status_code == 302
        refused = _post_form(client, "/signup/", {"email": unknown, "password1": NEW_PASSWORD,
                                                  "password2": NEW_PASSWORD})
        assert refused.status_code == 200 and "Too many sign-ups" in refused.text
