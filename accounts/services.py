"""Functions that write accounts, users and API keys."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction

from config import clock

from . import key_cache, keys
from .models import KEY_NAME_MAX_LENGTH, KEYS_PER_ACCOUNT, Account, ApiKey, User
from .signals import account_payment_lapsed, account_signing_up, api_key_revoked
from .verification import REVOKED, key_cache_name, key_hasher, verified_here_forget

logger = logging.getLogger(__name__)


class KeyCapReached(Exception):
    def __init__(self):
        super().__init__(
            f"An account can hold at most {KEYS_PER_ACCOUNT} API keys at a time. "
            "Revoke a key you no longer use, then create the new one.")


@dataclass(frozen=True)
class CreatedKey:
    api_key: ApiKey
    plaintext: str  # shown once, never stored


def api_key_create(*, account: Account, name: str) -> CreatedKey:
    """Create a key for the account, unless it already holds the cap of live keys.

    The account row is locked while counting, so concurrent creates queue up; the
    conditional unique constraint on (account, slot) is the backstop where locking is
    weaker (SQLite serialises writers instead)."""
    name = key_name_clean(name)
    generated = keys.generate()
    key_hash = key_hasher().hash(generated.plaintext)
    try:
        with transaction.atomic():
            Account.objects.select_for_update().get(pk=account.pk)
            used = set(ApiKey.objects.filter(account=account, revoked_at__isnull=True)
                       .values_list("slot", flat=True))
            free = [slot for slot in range(1, KEYS_PER_ACCOUNT + 1) if slot not in used]
            if not free:
                raise KeyCapReached()
            api_key = ApiKey.objects.create(account=account, name=name,
                                            lookup_id=generated.lookup_id, key_hash=key_hash,
                                            slot=free[0])
    except IntegrityError as exc:
        if "lookup_id" in str(exc):  # 62^12 ids: a clash is astronomically rare; try again
            return api_key_create(account=account, name=name)
        raise KeyCapReached() from exc
    return CreatedKey(api_key=api_key, plaintext=generated.plaintext)


def key_name_clean(name: str) -> str:
    """A key's name as stored, at creation and on renaming: trimmed, not empty, at most
    KEY_NAME_MAX_LENGTH characters."""
    name = (name or "").strip()
    if not name:
        raise ValueError("A key needs a name.")
    if len(name) > KEY_NAME_MAX_LENGTH:
        raise ValueError(f"A key's name has at most {KEY_NAME_MAX_LENGTH} characters.")
    return name


class KeyRevoked(Exception):
    def __init__(self):
        super().__init__("This key is revoked; a revoked key keeps its name.")


def api_key_rename(*, api_key: ApiKey, name: str) -> ApiKey:
    """Give a live key another name (the rules of `api_key_create`). Authentication never
    reads the name, so nothing cached changes."""
    name = key_name_clean(name)
    with transaction.atomic():
        renamed = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(name=name)
    if not renamed:
        raise KeyRevoked()
    api_key.name = name
    return api_key


def api_key_revoke(*, api_key: ApiKey, via: str, by: User | None = None) -> ApiKey:
    """Revoke a key, recording when, where (`via`: ApiKey.RevokedVia) and by whom (the
    signed-in customer or staff user; None from the command line). Every revocation comes
    here. Its cache entry becomes a tombstone before the database write, so the
    next request with the key is refused on every server process at once; a concurrent cold
    verification cannot overwrite a tombstone (it only adds absent entries). Should the
    write fail, the tombstone is taken back. Revoking a revoked key changes nothing: its
    first record stands."""
    via = ApiKey.RevokedVia(via)
    name = key_cache_name(api_key.lookup_id)
    store = key_cache.store()
    store.set(name, REVOKED, timeout=settings.API_KEY_CACHE_SECONDS * 2)
    verified_here_forget(api_key.lookup_id)
    try:
        with transaction.atomic():
            updated = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
                revoked_at=clock.utcnow(), revoked_via=via, revoked_by=by)
    except Exception:
        store.delete(name)
        raise
    api_key.refresh_from_db()
    if updated:
        logger.info("API key %s revoked %s", api_key.display, via.label)
        transaction.on_commit(lambda: api_key_revoked.send(sender=ApiKey, key_id=api_key.pk,
                                                            account_id=api_key.account_id))
    return api_key


def account_payment_set(*, account: Account, payment: str) -> Account:
    """Set the payment standing; a lapse closes the account's open streams."""
    previous = Account.objects.filter(pk=account.pk).values_list("payment", flat=True).first()
    account.payment = payment
    account.save(update_fields=["payment"])
    if payment == Account.Payment.LAPSED and previous != payment:
        transaction.on_commit(lambda: account_payment_lapsed.send(sender=Account, account_id=account.pk))
    return account


def account_upsert(*, email: str, plan, password: str | None = None,
                   payment: str | None = None, account_name: str | None = None) -> User:
    """Create or update a customer user and its account on `plan` (a billing.Plan; staff
    command `account`)."""
    email = email.strip().lower()
    with transaction.atomic():
        user = User.objects.select_for_update().filter(email=email).first()
        if user is None:
            account = Account.objects.create(name=account_name or email, plan=plan,
                                             payment=payment or Account.Payment.ACTIVE)
            user = User.objects.create_user(email=email, password=password, account=account)
            if password is None:
                user.set_unusable_password()
                user.save(update_fields=["password"])
            return user
        if user.account is None:
            user.account = Account.objects.create(name=account_name or email, plan=plan)
        account = user.account
        account.plan = plan
        if account_name:
            account.name = account_name
        account.save()
        if payment:
            account_payment_set(account=account, payment=payment)
        if password is not None:
            user.set_password(password)
        user.save()
        return user


# -- sign-up -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Signup:
    """What a sign-up did. The page answers all three alike (it never tells whether an
    address has an account); the e-mail sent to the address differs."""

    CREATED = "created"  # a new pending user and account: e-mail the confirmation link
    PENDING = "pending"  # the address waits for its link: a new link, and the password just given
    EXISTING = "existing"  # the address has a working account: e-mail a note, change nothing

    user: User
    outcome: str


def signup_register(*, email: str, password: str, account_name: str = "") -> Signup:
    """Sign an address up: a user who cannot sign in until the e-mailed link confirms the
    address, and its account on the plan new sign-ups start on (given by the app owning
    plans, through `account_signing_up`).

    Signing up again while the address is pending replaces the password: whoever follows
    the newest link signs in with the newest password, and the older links stop working
    (the token hashes the password). A confirmed address is left untouched."""
    email = User.objects.normalize_email(email).strip().lower()
    account_name = account_name.strip()[:200]
    try:
        with transaction.atomic():
            user = User.objects.select_for_update().filter(email=email).first()
            if user is None:
                account = Account(name=account_name or email)
                account_signing_up.send(sender=Account, account=account)
                if account.plan_id is None:
                    raise ImproperlyConfigured("No plan for a new sign-up: the billing app answers "
                                               "accounts.signals.account_signing_up.")
                account.save()
                user = User.objects.create_user(email=email, password=password, account=account,
                                                is_active=False, signup_pending=True)
                return Signup(user=user, outcome=Signup.CREATED)
            if user.signup_pending:
                user.set_password(password)
                user.save(update_fields=["password"])
                if account_name and user.account is not None:
                    Account.objects.filter(pk=user.account_id).update(name=account_name)
                return Signup(user=user, outcome=Signup.PENDING)
            return Signup(user=user, outcome=Signup.EXISTING)
    except IntegrityError:
        # The same address signed up at the same moment and won the unique email: this one
        # now finds it pending.
        if not User.objects.filter(email=email).exists():
            raise
        return signup_register(email=email, password=password, account_name=account_name)


def signup_confirm(*, user: User) -> bool:
    """Confirm a pending sign-up's address: the user can sign in from now on. True only for
    the one call that confirmed it (a conditional update, so a link works once even when
    followed twice at the same moment)."""
    with transaction.atomic():
        confirmed = User.objects.filter(pk=user.pk, signup_pending=True).update(
            signup_pending=False, is_active=True)
    if confirmed:
        logger.info("user %s confirmed their e-mail address", user.pk)
    return bool(confirmed)
