"""Renaming a key, and revoked keys kept as a history with when, where and by whom: every
way to revoke goes through accounts.services.api_key_revoke, which records it."""

import re

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client

from accounts.models import ApiKey
from accounts.services import KeyRevoked, api_key_create, api_key_rename, api_key_revoke
from config import clock

PASSWORD = "correct horse battery"


@pytest.fixture
def user(account):
    return account.users.get()


@pytest.fixture
def signed_in(user):
    client = Client()
    assert client.login(email=user.email, password=PASSWORD)
    return client


def test_renaming_keeps_the_key_and_follows_the_rules_of_creation(account, client_for):
    created = api_key_create(account=account, name="notebook")
    renamed = api_key_rename(api_key=created.api_key, name="  research box  ")
    assert renamed.name == "research box" and ApiKey.objects.get(pk=renamed.pk).name == "research box"
    assert client_for(created.plaintext).get("/api/v1/me/usage").status_code == 200
    for bad in ("", "   ", "x" * 101):
        with pytest.raises(ValueError):
            api_key_rename(api_key=created.api_key, name=bad)
    with pytest.raises(ValueError):
        api_key_create(account=account, name="x" * 101)
    assert ApiKey.objects.get(pk=renamed.pk).name == "research box"


def test_a_revoked_key_cannot_be_renamed(account):
    created = api_key_create(account=account, name="old")
    api_key_revoke(api_key=created.api_key, via=ApiKey.RevokedVia.COMMAND)
    with pytest.raises(KeyRevoked):
        api_key_rename(api_key=created.api_key, name="new")
    assert ApiKey.objects.get(pk=created.api_key.pk).name == "old"


def test_renaming_on_the_page_shows_the_new_name_and_refuses_a_blank_or_long_one(signed_in, account):
    key = api_key_create(account=account, name="notebook").api_key
    page = signed_in.get(f"/account/keys/{key.pk}/rename/")
    assert page.status_code == 200 and 'value="notebook"' in page.content.decode()
    for bad, message in (("   ", "This field is required."), ("x" * 101, "at most 100 characters")):
        refused = signed_in.post(f"/account/keys/{key.pk}/rename/", {"name": bad})
        assert refused.status_code == 200 and message in refused.content.decode()
    done = signed_in.post(f"/account/keys/{key.pk}/rename/", {"name": "desk server"}, follow=True)
    html = done.content.decode()
    assert "“notebook” to “desk server”" in html and "desk server" in html
    assert ApiKey.objects.get(pk=key.pk).name == "desk server"


def test_another_accounts_key_or_a_revoked_key_is_not_found_on_the_rename_page(signed_in, account, make_account):
    theirs = api_key_create(account=make_account(), name="theirs").api_key
    assert signed_in.get(f"/account/keys/{theirs.pk}/rename/").status_code == 404
    assert signed_in.post(f"/account/keys/{theirs.pk}/rename/", {"name": "mine now"}).status_code == 404
    ours = api_key_create(account=account, name="ours").api_key
    api_key_revoke(api_key=ours, via=ApiKey.RevokedVia.COMMAND)
    assert signed_in.post(f"/account/keys/{ours.pk}/rename/", {"name": "x"}).status_code == 404
    assert ApiKey.objects.get(pk=theirs.pk).name == "theirs"


def test_revoking_on_the_page_records_the_customer_and_keeps_the_key_in_the_history(signed_in, user, account):
    key = api_key_create(account=account, name="laptop").api_key
    signed_in.post(f"/account/keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.revoked_via == "page" and key.revoked_by == user and key.revoked_at is not None
    html = signed_in.get("/account/keys/").content.decode()
    history = html.split('id="revoked-history"')[1]
    assert "laptop" in history and f"by {user.email} on the API keys page" in history
    assert f"{key.revoked_at:%Y-%m-%d %H:%M} UTC" in history
    assert 'class="revoked-key"' in history
    assert "No keys yet." in html  # the live list is empty: revoked keys are not live


def test_the_command_line_records_how_and_a_second_revoke_keeps_the_first_record(account, user):
    key = api_key_create(account=account, name="ci").api_key
    call_command("apikey", user.email, "--revoke", key.lookup_id)
    key.refresh_from_db()
    assert key.revoked_via == "command" and key.revoked_by is None
    first = key.revoked_at
    api_key_revoke(api_key=key, via=ApiKey.RevokedVia.ADMIN, by=user)
    key.refresh_from_db()
    assert (key.revoked_at, key.revoked_via, key.revoked_by) == (first, "command", None)


def test_every_revocation_must_say_how(account):
    key = api_key_create(account=account, name="k").api_key
    with pytest.raises(TypeError):
        api_key_revoke(api_key=key)  # noqa - `via` is required
    with pytest.raises(ValueError):
        api_key_revoke(api_key=key, via="somewhere")
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=clock.utcnow())  # around the service
    assert ApiKey.objects.get(pk=key.pk).is_live


def test_revoked_keys_do_not_count_towards_the_cap_and_the_page_offers_the_form_again(signed_in, account):
    first = api_key_create(account=account, name="one").api_key
    api_key_create(account=account, name="two")
    assert 'id="cap-notice"' in signed_in.get("/account/keys/").content.decode()
    api_key_revoke(api_key=first, via=ApiKey.RevokedVia.COMMAND)
    html = signed_in.get("/account/keys/").content.decode()
    assert 'id="create-key-form"' in html and len(re.findall(r'class="revoked-key"', html)) == 1
    api_key_create(account=account, name="three")
    assert ApiKey.objects.filter(account=account, revoked_at__isnull=True).count() == 2
