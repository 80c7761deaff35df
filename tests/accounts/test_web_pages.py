import re

import pytest
from django.test import Client

from accounts.models import ApiKey
from accounts.services import api_key_create

PASSWORD = "correct horse battery"


@pytest.fixture
def user(account):
    return account.users.get()


@pytest.fixture
def signed_in(user):
    client = Client()
    assert client.login(email=user.email, password=PASSWORD)
    return client


def _nonce(html: str) -> str:
    return re.search(r'name="nonce" value="([^"]+)"', html).group(1)


def _create(client, name="notebook"):
    page = client.get("/account/keys/").content.decode()
    return client.post("/account/keys/", {"name": name, "nonce": _nonce(page)})


def test_pages_need_sign_in(db):
    response = Client().get("/account/keys/")
    assert response.status_code == 302 and "/signin/" in response["Location"]


def test_sign_in_with_email_and_password_leads_to_keys(user):
    client = Client()
    response = client.post("/signin/", {"username": user.email, "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/account/keys/"
    assert client.get("/account/keys/").status_code == 200


def test_sign_in_is_throttled_after_repeated_failures(user, settings):
    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        assert client.post("/signin/", {"username": user.email, "password": "nope"}).status_code == 200
    refused = client.post("/signin/", {"username": user.email, "password": PASSWORD})
    assert refused.status_code == 200
    assert "Too many failed sign-ins" in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_forms_refuse_posts_without_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    assert client.post("/signin/", {"username": user.email, "password": PASSWORD}).status_code == 403
    client.force_login(user)
    assert client.post("/account/keys/", {"name": "x", "nonce": "n"}).status_code == 403


def test_creating_a_key_shows_the_plaintext_once(signed_in, account):
    response = _create(signed_in)
    html = response.content.decode()
    plaintext = re.search(r'id="plaintext-key"[^>]*>(mdp_live_[0-9A-Za-z]{50})<', html).group(1)
    assert "Copy it now" in html and 'id="copy-key"' in html
    api_key = ApiKey.objects.get(account=account)
    assert plaintext.startswith(f"mdp_live_{api_key.lookup_id}")
    again = signed_in.get("/account/keys/").content.decode()
    assert plaintext not in again
    assert api_key.display in again


def test_resubmitting_the_same_form_creates_no_second_key(signed_in, account):
    page = signed_in.get("/account/keys/").content.decode()
    nonce = _nonce(page)
    signed_in.post("/account/keys/", {"name": "a", "nonce": nonce})
    repeat = signed_in.post("/account/keys/", {"name": "a", "nonce": nonce}).content.decode()
    assert "already submitted" in repeat
    assert "mdp_live_" not in re.sub(r"mdp_live_[0-9A-Za-z]{12}…", "", repeat)
    assert ApiKey.objects.filter(account=account).count() == 1


def test_the_cap_is_explained_when_reached(signed_in, account):
    _create(signed_in, "one")
    html = _create(signed_in, "two").content.decode()
    assert "Revoke one you no longer use" in html
    assert 'id="create-key-form"' not in html


def test_the_cap_holds_for_a_stale_form(signed_in, account):
    stale = _nonce(signed_in.get("/account/keys/").content.decode())
    _create(signed_in, "one")
    _create(signed_in, "two")
    html = signed_in.post("/account/keys/", {"name": "three", "nonce": stale}).content.decode()
    assert "at most 2 API keys" in html
    assert ApiKey.objects.filter(account=account, revoked_at__isnull=True).count() == 2


def test_revoke_asks_for_confirmation_then_refuses_the_key(signed_in, account, client_for):
    created = api_key_create(account=account, name="old")
    url = f"/account/keys/{created.api_key.pk}/revoke/"
    confirm = signed_in.get(url).content.decode()
    assert "cannot be undone" in confirm and created.api_key.display in confirm
    assert ApiKey.objects.get(pk=created.api_key.pk).revoked_at is None
    response = signed_in.post(url)
    assert response.status_code == 302
    assert ApiKey.objects.get(pk=created.api_key.pk).revoked_at is not None
    assert client_for(created.plaintext).get("/api/v1/me/usage").status_code == 401
    page = signed_in.get("/account/keys/").content.decode()
    assert "is revoked" in page
    assert "No keys yet" in page


def test_a_user_cannot_revoke_another_accounts_key(signed_in, make_account):
    other = api_key_create(account=make_account(), name="theirs")
    assert signed_in.post(f"/account/keys/{other.api_key.pk}/revoke/").status_code == 404
    assert ApiKey.objects.get(pk=other.api_key.pk).revoked_at is None


def test_sign_out_is_a_post(signed_in):
    assert signed_in.post("/signout/").status_code == 302
    assert signed_in.get("/account/keys/").status_code == 302
