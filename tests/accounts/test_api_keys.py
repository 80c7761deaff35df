import threading
from unittest import mock

import pytest
from django.apps import apps
from django.db import connection, connections

from accounts.models import ApiKey
from accounts.services import KeyCapReached, api_key_create, api_key_revoke

USAGE = "/api/v1/me/usage"


def _every_text_value_in_the_database():
    with connection.cursor() as cursor:
        for model in apps.get_models():
            table = model._meta.db_table
            columns = [f.column for f in model._meta.concrete_fields]
            quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
            cursor.execute(f"SELECT {quoted} FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                for value in row:
                    yield str(value)


def test_only_an_argon2id_hash_of_the_key_is_stored(account):
    created = api_key_create(account=account, name="research")
    stored = ApiKey.objects.get(pk=created.api_key.pk)
    assert stored.key_hash.startswith("$argon2id$")
    assert stored.lookup_id == created.plaintext[9:21]
    secret = created.plaintext[21:]
    assert not any(secret in value for value in _every_text_value_in_the_database())


def test_the_plaintext_is_not_kept_on_the_model(account):
    created = api_key_create(account=account, name="research")
    assert not any(created.plaintext in str(getattr(created.api_key, f.attname))
                   for f in ApiKey._meta.concrete_fields)


def test_a_third_live_key_is_refused(account):
    api_key_create(account=account, name="one")
    api_key_create(account=account, name="two")
    with pytest.raises(KeyCapReached, match="at most 2"):
        api_key_create(account=account, name="three")


def test_revoking_a_key_frees_a_place_under_the_cap(account):
    first = api_key_create(account=account, name="one")
    api_key_create(account=account, name="two")
    api_key_revoke(api_key=first.api_key, via="command")
    api_key_create(account=account, name="three")
    assert ApiKey.objects.filter(account=account, revoked_at__isnull=True).count() == 2


def test_a_key_authenticates_and_revoking_it_gives_401_on_the_next_request(api_key, client_for):
    client = client_for(api_key.plaintext)
    assert client.get(USAGE).status_code == 200
    api_key_revoke(api_key=api_key.api_key, via="command")
    response = client.get(USAGE)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_a_verified_key_is_reused_by_the_process_until_its_recheck_is_due(api_key, client_for, settings):
    """Another process's revoke writes a tombstone to the shared cache; this process keeps
    its own verified copy only until the recheck is due, then meets the tombstone."""
    import time

    from accounts import key_cache
    from accounts.verification import REVOKED, key_cache_name

    settings.API_KEY_RECHECK_SECONDS = 1.0
    client = client_for(api_key.plaintext)
    assert client.get(USAGE).status_code == 200
    key_cache.store().set(key_cache_name(api_key.api_key.lookup_id), REVOKED, timeout=60)
    with mock.patch.object(type(key_cache.store()), "get", autospec=True) as shared_get:
        assert client.get(USAGE).status_code == 200
    assert shared_get.call_count == 0
    time.sleep(1.05)
    assert client.get(USAGE).status_code == 401


def test_argon2_runs_only_on_a_cold_key(api_key, client_for):
    client = client_for(api_key.plaintext)
    with mock.patch("argon2.PasswordHasher.verify", autospec=True,
                    side_effect=lambda self, h, p: True) as verify:
        for _ in range(5):
            assert client.get(USAGE).status_code == 200
    assert verify.call_count == 1


def test_a_wrong_secret_with_a_known_lookup_id_is_refused_and_throttled(api_key, client_for, settings):
    from accounts import keys

    payload = api_key.plaintext[9:21] + "x" * 32
    forged = f"mdp_live_{payload}{keys.checksum(payload)}"
    client = client_for(forged)
    with mock.patch("argon2.PasswordHasher.verify", autospec=True,
                    side_effect=__import__("argon2").exceptions.VerifyMismatchError) as verify:
        for _ in range(settings.API_KEY_FAILED_VERIFY_LIMIT + 5):
            assert client.get(USAGE).status_code == 401
    assert verify.call_count == settings.API_KEY_FAILED_VERIFY_LIMIT


def test_a_forged_secret_is_refused_after_the_real_key_is_warm(api_key, client_for):
    from accounts import keys

    assert client_for(api_key.plaintext).get(USAGE).status_code == 200
    payload = api_key.plaintext[9:21] + "y" * 32
    forged = f"mdp_live_{payload}{keys.checksum(payload)}"
    assert client_for(forged).get(USAGE).status_code == 401


def test_last_used_is_recorded(api_key, client_for):
    assert ApiKey.objects.get(pk=api_key.api_key.pk).last_used_at is None
    client_for(api_key.plaintext).get(USAGE)
    assert ApiKey.objects.get(pk=api_key.api_key.pk).last_used_at is not None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_creates_leave_exactly_two_live_keys(make_account):
    account = make_account()
    barrier = threading.Barrier(20)
    outcomes = []

    def create(n):
        try:
            barrier.wait()
            api_key_create(account=account, name=f"k{n}")
            outcomes.append("created")
        except KeyCapReached:
            outcomes.append("refused")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created"] * 2 + ["refused"] * 18
    assert ApiKey.objects.filter(account=account, revoked_at__isnull=True).count() == 2


@pytest.mark.django_db
def test_the_database_refuses_a_third_live_key_even_past_the_service(account):
    from django.db import IntegrityError, transaction

    api_key_create(account=account, name="one")
    api_key_create(account=account, name="two")
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiKey.objects.create(account=account, name="sneaky", lookup_id="A" * 12, key_hash="x", slot=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiKey.objects.create(account=account, name="sneaky", lookup_id="B" * 12, key_hash="x", slot=3)


def test_the_loop_knows_a_key_only_while_this_process_verified_it_and_its_recheck_is_not_due(
        api_key, client_for, settings, monkeypatch):
    """`api_key_verified_here` (what the event loop's answers trust) never asks a cache or
    the database: unknown until the full path verified the key, then known until the
    recheck is due, and never for a forged secret."""
    import time

    from accounts import keys
    from accounts.verification import api_key_verified_here

    settings.API_KEY_RECHECK_SECONDS = 1.0
    assert api_key_verified_here(presented=api_key.plaintext) is None
    assert client_for(api_key.plaintext).get(USAGE).status_code == 200
    known = api_key_verified_here(presented=api_key.plaintext)
    assert (known.key_id, known.account_id) == (api_key.api_key.pk, api_key.api_key.account_id)
    payload = api_key.plaintext[9:21] + "y" * 32
    assert api_key_verified_here(presented=f"mdp_live_{payload}{keys.checksum(payload)}") is None
    assert api_key_verified_here(presented="not a key") is None
    later = time.time() + 1.05
    monkeypatch.setattr("accounts.verification.time.time", lambda: later)
    assert api_key_verified_here(presented=api_key.plaintext) is None
