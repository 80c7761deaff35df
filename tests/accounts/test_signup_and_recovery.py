"""Sign-up with e-mail confirmation, password reset, sign-out notice, the landing page and
the favicon, through Django's test client (tests/e2e/test_signup_pages.py drives the same
on a running server in a browser)."""

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.core import mail
from django.test import Client

from accounts.models import Account, User
from accounts.tokens import signup_token_generator
from billing.models import Plan

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"
LINK = re.compile(r"https?://[^/\s]+(/signup/confirm/[^/\s]+/[^/\s]+/)")
RESET_LINK = re.compile(r"https?://[^/\s]+(/password/reset/[^/\s]+/[^/\s]+/)")


def sign_up(client, email, password=PASSWORD, password2=None, **extra):
    return client.post("/signup/", {"email": email, "password1": password,
                                    "password2": password if password2 is None else password2, **extra})


def link_in(message, pattern=LINK) -> str:
    return pattern.search(message.body).group(1)


def sign_in(client, email, password=PASSWORD):
    response = client.post("/signin/", {"username": email, "password": password})
    return response, "_auth_user_id" in client.session


# -- sign-up ----------------------------------------------------------------------------------

def test_a_sign_up_cannot_sign_in_until_the_e_mailed_link_confirms_the_address(db):
    client = Client()
    response = sign_up(client, "New.Person@Example.com", account_name="Quant Desk")
    assert response.status_code == 302 and response["Location"] == "/signup/sent/"
    sent = client.get("/signup/sent/").content.decode()
    assert "new.person@example.com" in sent and "Check your inbox" in sent

    user = User.objects.get(email="new.person@example.com")
    assert user.signup_pending and not user.is_active and user.account.name == "Quant Desk"
    (message,) = mail.outbox
    assert message.to == ["new.person@example.com"] and "Confirm" in message.subject

    refused, signed_in = sign_in(Client(), "new.person@example.com")
    assert not signed_in and "Confirm your e-mail address first" in refused.content.decode()
    assert '<a href="/signup/resend/">Send a new link</a>' in refused.content.decode()

    confirmed = client.get(link_in(message))
    assert confirmed.status_code == 302 and confirmed["Location"] == "/signin/"
    assert "is confirmed" in client.get("/signin/").content.decode()
    user.refresh_from_db()
    assert user.is_active and not user.signup_pending
    response, signed_in = sign_in(Client(), "new.person@example.com")
    assert signed_in and response["Location"] == "/account/keys/"


def test_a_new_sign_up_starts_on_the_free_plan_even_before_plans_were_seeded(db):
    assert not Plan.objects.exists()
    sign_up(Client(), "first@example.com")
    account = Account.objects.get(users__email="first@example.com")
    assert account.plan.name == "free" and not account.plan.has_api
    assert account.payment == Account.Payment.ACTIVE


def test_a_confirmation_link_works_once(db):
    client = Client()
    sign_up(client, "once@example.com")
    link = link_in(mail.outbox[0])
    assert client.get(link)["Location"] == "/signin/"
    again = Client().get(link)
    assert again.status_code == 302 and again["Location"] == "/signin/"
    assert "already confirmed" in Client().get(link, follow=True).content.decode()


def test_an_expired_or_mangled_confirmation_link_says_so_and_offers_a_new_one(db, settings):
    sign_up(Client(), "late@example.com")
    link = link_in(mail.outbox[0])
    real_now = signup_token_generator._now()
    with mock.patch.object(signup_token_generator, "_now",
                           return_value=real_now + timedelta(seconds=settings.SIGNUP_LINK_TIMEOUT_SECONDS + 5)):
        expired = Client().get(link)
    assert expired.status_code == 200 and "no longer works" in expired.content.decode()
    assert "/signup/resend/" in expired.content.decode()
    for mangled in (link[:-3] + "zz/", "/signup/confirm/!!/x-y/", "/signup/confirm/OTk5OTk5/abc-def/"):
        response = Client().get(mangled)
        assert response.status_code == 200 and "no longer works" in response.content.decode(), mangled
    assert User.objects.get(email="late@example.com").signup_pending


def test_a_resent_link_confirms_and_then_every_link_says_the_address_is_confirmed(db):
    sign_up(Client(), "resend@example.com")
    first = link_in(mail.outbox[0])
    response = Client().post("/signup/resend/", {"email": "resend@example.com"})
    assert response.status_code == 302 and response["Location"] == "/signup/sent/"
    assert len(mail.outbox) == 2 and mail.outbox[1].to == ["resend@example.com"]
    second = link_in(mail.outbox[1])
    assert Client().get(second)["Location"] == "/signin/"
    assert User.objects.get(email="resend@example.com").is_active
    assert "already confirmed" in Client().get(first, follow=True).content.decode()


def test_signing_up_again_while_pending_sets_the_newest_password_and_voids_the_older_links(db):
    sign_up(Client(), "twice@example.com", password=PASSWORD)
    first = link_in(mail.outbox[0])
    sign_up(Client(), "twice@example.com", password=NEW_PASSWORD)
    second = link_in(mail.outbox[1])
    assert User.objects.filter(email="twice@example.com").count() == 1
    assert "no longer works" in Client().get(first).content.decode()
    assert Client().get(second)["Location"] == "/signin/"
    assert not sign_in(Client(), "twice@example.com", PASSWORD)[1]
    assert sign_in(Client(), "twice@example.com", NEW_PASSWORD)[1]


def test_signing_up_with_an_existing_address_answers_alike_and_e_mails_the_owner_instead(make_account):
    make_account(email="taken@example.com")
    fresh = Client()
    sign_up(fresh, "fresh@example.com")
    taken = Client()
    response = sign_up(taken, "taken@example.com", password=NEW_PASSWORD)
    assert response.status_code == 302 and response["Location"] == "/signup/sent/"
    page = taken.get("/signup/sent/").content.decode()
    assert page == fresh.get("/signup/sent/").content.decode().replace("fresh@", "taken@")
    assert User.objects.filter(email="taken@example.com").count() == 1
    owner_mail = mail.outbox[-1]
    assert owner_mail.to == ["taken@example.com"] and "already have" in owner_mail.subject
    assert not LINK.search(owner_mail.body) and "/password/reset/" in owner_mail.body
    assert sign_in(Client(), "taken@example.com", PASSWORD)[1]  # nothing changed
    assert not sign_in(Client(), "taken@example.com", NEW_PASSWORD)[1]


@pytest.mark.parametrize("password, password2, error", [
    ("short", "short", "too short"),
    ("12345678901", "12345678901", "entirely numeric"),
    ("password123", "password123", "too common"),
    (PASSWORD, "something else", "didn’t match"),
])
def test_a_weak_or_mismatched_password_is_a_form_error(db, password, password2, error):
    response = sign_up(Client(), "weak@example.com", password=password, password2=password2)
    assert response.status_code == 200 and error in response.content.decode()
    assert not User.objects.filter(email="weak@example.com").exists() and not mail.outbox


@pytest.mark.parametrize("email", ["", "not-an-address", "a@b", "x" * 250 + "@example.com"])
def test_a_bad_address_is_a_form_error(db, email):
    response = sign_up(Client(), email)
    assert response.status_code == 200 and 'class="field-error"' in response.content.decode()
    assert not User.objects.exists() and not mail.outbox


def test_a_password_like_the_address_is_refused(db):
    response = sign_up(Client(), "quantdesk@example.com", password="quantdesk@example")
    assert response.status_code == 200 and "too similar" in response.content.decode()


def test_sign_up_is_throttled_per_address_and_email(db, settings):
    client = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(settings.SIGNUP_LIMIT):
        assert sign_up(client, "spam@example.com").status_code == 302
    refused = sign_up(client, "spam@example.com")
    assert refused.status_code == 200 and "Too many sign-ups" in refused.content.decode()
    resend = client.post("/signup/resend/", {"email": "spam@example.com"})
    assert resend.status_code == 200 and "Too many" in resend.content.decode()
    assert len(mail.outbox) == settings.SIGNUP_LIMIT
    assert sign_up(Client(REMOTE_ADDR="198.51.100.4"), "spam@example.com").status_code == 302
    assert sign_up(client, "other@example.com").status_code == 302


def test_resend_for_an_unknown_or_confirmed_address_answers_alike_and_sends_nothing(make_account):
    make_account(email="known@example.com")
    for email in ("nobody@example.com", "known@example.com"):
        response = Client().post("/signup/resend/", {"email": email})
        assert response.status_code == 302 and response["Location"] == "/signup/sent/"
    assert not mail.outbox


def test_the_sign_up_pages_send_a_signed_in_user_to_their_keys(make_account):
    make_account(email="in@example.com")
    client = Client()
    assert client.login(email="in@example.com", password=PASSWORD)
    for url in ("/signup/", "/signup/resend/"):
        assert client.get(url)["Location"] == "/account/keys/"


# -- password reset ---------------------------------------------------------------------------

def test_a_password_reset_link_sets_a_new_password_once(make_account, settings):
    make_account(email="forgot@example.com")
    response = Client().post("/password/reset/", {"email": "Forgot@Example.com"})
    assert response.status_code == 302 and response["Location"] == "/password/reset/sent/"
    (message,) = mail.outbox
    assert message.to == ["forgot@example.com"]
    assert f"within {settings.PASSWORD_RESET_TIMEOUT // 60} minutes" in message.body
    client = Client()
    form = client.get(link_in(message, RESET_LINK), follow=True)
    assert "Choose a new password" in form.content.decode()
    done = client.post(form.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == "/password/reset/done/"
    assert not sign_in(Client(), "forgot@example.com", PASSWORD)[1]
    assert sign_in(Client(), "forgot@example.com", NEW_PASSWORD)[1]
    used = Client().get(link_in(message, RESET_LINK), follow=True)
    assert "no longer works" in used.content.decode()


def test_a_reset_refuses_a_weak_new_password(make_account):
    make_account(email="weakreset@example.com")
    Client().post("/password/reset/", {"email": "weakreset@example.com"})
    client = Client()
    form = client.get(link_in(mail.outbox[0], RESET_LINK), follow=True)
    response = client.post(form.redirect_chain[-1][0], {"new_password1": "123", "new_password2": "123"})
    assert response.status_code == 200 and "too short" in response.content.decode()
    assert sign_in(Client(), "weakreset@example.com", PASSWORD)[1]


def test_a_reset_for_an_unknown_address_looks_the_same_and_sends_nothing(make_account):
    make_account(email="exists@example.com")
    known, unknown = Client(), Client()
    a = known.post("/password/reset/", {"email": "exists@example.com"}, follow=True)
    b = unknown.post("/password/reset/", {"email": "nobody@example.com"}, follow=True)
    assert a.redirect_chain == b.redirect_chain == [("/password/reset/sent/", 302)]
    assert a.content == b.content
    assert [m.to for m in mail.outbox] == [["exists@example.com"]]


def test_a_reset_for_a_pending_sign_up_sends_a_new_confirmation_link(db):
    sign_up(Client(), "pendingreset@example.com")
    Client().post("/password/reset/", {"email": "pendingreset@example.com"})
    assert len(mail.outbox) == 2 and LINK.search(mail.outbox[1].body)


def test_password_reset_is_throttled_per_address_and_email(db, settings):
    client = Client(REMOTE_ADDR="203.0.113.10")
    for _ in range(settings.PASSWORD_RESET_LIMIT):
        assert client.post("/password/reset/", {"email": "someone@example.com"}).status_code == 302
    refused = client.post("/password/reset/", {"email": "someone@example.com"})
    assert refused.status_code == 200 and "Too many password resets" in refused.content.decode()


def test_a_reset_password_lifts_the_sign_in_throttle(make_account, settings):
    make_account(email="locked@example.com")
    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        sign_in(client, "locked@example.com", "wrong")
    assert "Too many failed" in sign_in(client, "locked@example.com", PASSWORD)[0].content.decode()
    client.post("/password/reset/", {"email": "locked@example.com"})
    form = client.get(link_in(mail.outbox[0], RESET_LINK), follow=True)
    client.post(form.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert sign_in(client, "locked@example.com", NEW_PASSWORD)[1]


# -- sign-out, landing page, favicon ----------------------------------------------------------

def test_signing_out_lands_on_sign_in_with_a_notice(make_account):
    make_account(email="out@example.com")
    client = Client()
    assert client.login(email="out@example.com", password=PASSWORD)
    response = client.post("/signout/", follow=True)
    assert response.redirect_chain == [("/signin/", 302)]
    assert "You are signed out." in response.content.decode()
    assert client.get("/account/keys/").status_code == 302


def test_get_signout_asks_to_confirm_with_a_post_button_and_signs_nobody_out(make_account):
    make_account(email="ask@example.com")
    client = Client()
    assert client.login(email="ask@example.com", password=PASSWORD)
    page = client.get("/signout/")
    html = page.content.decode()
    assert page.status_code == 200 and "Sign out?" in html and 'id="confirm-signout"' in html
    assert client.get("/account/keys/").status_code == 200
    visitor = Client().get("/signout/", follow=True)
    assert visitor.redirect_chain == [("/signin/", 302)] and "You are signed out." in visitor.content.decode()


def test_the_landing_page_shows_the_plans_from_the_database_and_the_way_in(plans):
    Plan.objects.filter(name="pro").update(pair_price_usd="17.50", monthly_requests=1_234_567)
    response = Client().get("/")
    html = response.content.decode()
    assert response.status_code == 200
    for name in ("Free", "Pro", "Enterprise"):
        assert f"<h3>{name}</h3>" in html
    assert "$17.50" in html and "$12.00" in html and "1,234,567 requests a month" in html
    assert "10.0\xa0MB of responses a month" in html
    assert 'href="/signup/"' in html and 'href="/signin/"' in html


def test_a_signed_in_visitor_of_the_front_page_goes_to_their_keys(make_account):
    make_account(email="home@example.com")
    client = Client()
    assert client.login(email="home@example.com", password=PASSWORD)
    assert client.get("/")["Location"] == "/account/keys/"


def test_the_favicon_is_served_at_the_root_and_linked_from_every_page(db):
    response = Client().get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] in ("image/x-icon", "image/vnd.microsoft.icon")
    assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"
    assert '<link rel="icon" href="/static/favicon.svg"' in Client().get("/signin/").content.decode()
    assert Client().get("/static/favicon.svg").status_code == 200
