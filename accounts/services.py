"""Functions that write accounts, users and API keys."""

from __future__ import annotations

import hmac
import logging
import threading
import time
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction

from config import clock

from . import key_cache, keys
from .models import KEY_NAME_MAX_LENGTH, KEYS_PER_ACCOUNT, Account, ApiKey, User
from .signals import account_payment_lapsed, account_signing_up, api_key_revoked

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


@dataclass(frozen=True)
class CachedKey:
    """What the key cache holds for a verified key: enough to authenticate without argon2,
    and when the database last said the key is live (`checked_at`)."""

    key_id: int
    account_id: int
    fingerprint: str
    touched_at: float  # last use recorded in the database
    checked_at: float = 0.0

    def dumps(self) -> str:
        return f"{self.key_id}:{self.account_id}:{self.fingerprint}:{self.touched_at:.0f}:{self.checked_at:.3f}"

    @classmethod
    def loads(cls, text: str) -> CachedKey | None:
        try:
            key_id, account_id, fingerprint, touched_at, *checked = text.split(":")
            return cls(int(key_id), int(account_id), fingerprint, float(touched_at),
                       float(checked[0]) if checked else 0.0)
        except (ValueError, AttributeError, IndexError):
            return None


REVOKED = "revoked"


def _hasher() -> PasswordHasher:
    return PasswordHasher(**settings.API_KEY_ARGON2)


def _pepper() -> bytes:
    return settings.API_KEY_PEPPER.encode("utf-8")


def key_cache_name(lookup_id: str) -> str:
    return f"apikey:{lookup_id}"


def _failures_cache_name(lookup_id: str) -> str:
    return f"apikey-fail:{lookup_id}"


def api_key_create(*, account: Account, name: str) -> CreatedKey:
    """Create a key for the account, unless it already holds the cap of live keys.

    The account row is locked while counting, so concurrent creates queue up; the
    conditional unique constraint on (account, slot) is the backstop where locking is
    weaker (SQLite serialises writers instead)."""
    name = key_name_clean(name)
    generated = keys.generate()
    key_hash = _hasher().hash(generated.plaintext)
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
    _verified_here.pop(api_key.lookup_id, None)
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


# Keys this process verified, reused without asking the shared cache until they are due
# for their recheck (API_KEY_RECHECK_SECONDS after the database last said they are live):
# a round trip to Redis was a quarter of a counted request's cost on a loaded server
# (docs/BENCHMARKS.md). A revoke's tombstone reaches the other processes when their copy
# falls due, so no process accepts a revoked key for longer than the recheck interval.
_verified_here: dict[str, CachedKey] = {}  # lookup id -> entry
_VERIFIED_HERE_MEMORY = 100_000


_NOT_HERE = object()


def _verified_copy(parsed: keys.ParsedKey, fingerprint: str, now: float):
    """This process's own verified entry while it is not due for its recheck: the entry, or
    None when the presented secret is not the key's; _NOT_HERE when the process cannot say."""
    entry = _verified_here.get(parsed.lookup_id)
    if entry is None or now - entry.checked_at >= settings.API_KEY_RECHECK_SECONDS:
        return _NOT_HERE
    return entry if hmac.compare_digest(entry.fingerprint, fingerprint) else None


def api_key_verified_here(*, presented: str) -> CachedKey | None:
    """The key behind a presented plaintext when this process verified it and it is not
    due for its recheck: `api_key_authenticate`'s hot path alone, with no I/O, for a
    request served on the event loop. None means "not known here": the caller asks
    `api_key_authenticate`, which also refuses what it must."""
    parsed = keys.parse(presented)
    if parsed is None:
        return None
    entry = _verified_copy(parsed, keys.fingerprint(parsed.plaintext, _pepper()), time.time())
    return None if entry is _NOT_HERE else entry


def api_key_authenticate(*, presented: str) -> CachedKey | None:
    """The key behind a presented plaintext, or None. Hot path: checksum, the process's
    own copy of the verified entry, a constant-time compare. Warm path: one shared cache
    get. Cold path (first use on this cache): one argon2 verify, then the keyed fingerprint
    is cached. Failed cold verifications are throttled per lookup id so they cannot be used
    to burn CPU."""
    parsed = keys.parse(presented)
    if parsed is None:
        return None
    fingerprint = keys.fingerprint(parsed.plaintext, _pepper())
    now = time.time()
    entry = _verified_copy(parsed, fingerprint, now)
    if entry is not _NOT_HERE:
        return entry
    try:
        cached = key_cache.store().get(key_cache_name(parsed.lookup_id))
    except key_cache.Unavailable:
        return _verify_without_cache(parsed, fingerprint)
    if cached == REVOKED:
        _verified_here.pop(parsed.lookup_id, None)
        return None
    entry = CachedKey.loads(cached) if cached else None
    if entry is not None:
        if not hmac.compare_digest(entry.fingerprint, fingerprint):
            return None
        if now - entry.checked_at >= settings.API_KEY_RECHECK_SECONDS:
            entry = _recheck(parsed.lookup_id, entry, now)
    else:
        entry = _verify_cold(parsed, fingerprint)
    if entry is None:
        _verified_here.pop(parsed.lookup_id, None)
    else:
        if len(_verified_here) >= _VERIFIED_HERE_MEMORY:
            _verified_here.clear()
        _verified_here[parsed.lookup_id] = entry
    return entry


def _recheck(lookup_id: str, entry: CachedKey, now: float) -> CachedKey | None:
    """Ask the database whether a cached key is still live, at most once per
    API_KEY_RECHECK_SECONDS per key (per process in embedded mode, where the cache is the
    process's own; across processes in full mode). The revoke's tombstone refuses at once
    where it can be seen; this bounds the time for every revoke it cannot reach: another
    process's cache in embedded mode (the staff command, a second server), a write that
    went around the service."""
    name, store = key_cache_name(lookup_id), key_cache.store()
    if not ApiKey.objects.filter(pk=entry.key_id, revoked_at__isnull=True).exists():
        try:
            store.set(name, REVOKED, timeout=settings.API_KEY_CACHE_SECONDS * 2)
        except key_cache.Unavailable:
            pass
        return None
    if now - entry.touched_at >= settings.API_KEY_LAST_USED_RESOLUTION_SECONDS:
        return _record_use(lookup_id, entry, fresh=False)
    checked = CachedKey(entry.key_id, entry.account_id, entry.fingerprint, entry.touched_at, now)
    try:
        store.replace_unless(name, checked.dumps(), timeout=settings.API_KEY_CACHE_SECONDS, unless=REVOKED)
    except key_cache.Unavailable:
        pass
    return checked


def _record_use(lookup_id: str, entry: CachedKey, *, fresh: bool) -> CachedKey:
    """Record last use at most once a minute per key, not on every request, and (re)cache
    the entry. A fresh entry is only added, a refreshed one only replaces a live entry: a
    revoke's tombstone written in the meantime always wins."""
    ApiKey.objects.filter(pk=entry.key_id).update(last_used_at=clock.utcnow())
    now = time.time()
    touched = CachedKey(entry.key_id, entry.account_id, entry.fingerprint, now, now)
    name, store = key_cache_name(lookup_id), key_cache.store()
    try:
        if fresh:
            store.add(name, touched.dumps(), timeout=settings.API_KEY_CACHE_SECONDS)
        else:
            store.replace_unless(name, touched.dumps(), timeout=settings.API_KEY_CACHE_SECONDS,
                                 unless=REVOKED)
    except key_cache.Unavailable:
        pass  # verified all the same; the next request verifies again
    return touched


def _verify_cold(parsed: keys.ParsedKey, fingerprint: str) -> CachedKey | None:
    failures_name = _failures_cache_name(parsed.lookup_id)
    try:
        if (cache.get(failures_name) or 0) >= settings.API_KEY_FAILED_VERIFY_LIMIT:
            return None
    except key_cache.UNREACHABLE:  # the shared cache went away since the key lookup
        return _verify_without_cache(parsed, fingerprint)
    row = (ApiKey.objects.filter(lookup_id=parsed.lookup_id, revoked_at__isnull=True)
           .values("id", "account_id", "key_hash").first())
    if row is None:
        return None
    try:
        _hasher().verify(row["key_hash"], parsed.plaintext)
    except (VerificationError, InvalidHashError):
        try:
            if not cache.add(failures_name, 1, timeout=settings.API_KEY_FAILED_VERIFY_WINDOW_SECONDS):
                cache.incr(failures_name)
        except ValueError:
            pass
        except key_cache.UNREACHABLE:
            _local_failure_add(parsed.lookup_id)
        return None
    return _record_use(parsed.lookup_id, CachedKey(row["id"], row["account_id"], fingerprint, 0.0),
                       fresh=True)


# -- without the shared cache -------------------------------------------------------------
# Redis down must not lock every customer out: the database decides (so a revoked key is
# refused at once), and this process remembers which stored hash it verified each presented
# key against (by its keyed fingerprint, as the shared cache does), so argon2 runs once per
# key and process, not on every request. Failed verifications are throttled per process.

_degraded_lock = threading.Lock()
_degraded_verified: dict[tuple[str, str], str] = {}  # (lookup id, stored hash) -> fingerprint
_degraded_failures: dict[str, tuple[int, float]] = {}  # lookup id -> (failures, window start)
_DEGRADED_MEMORY = 10_000


def _local_failures_exceeded(lookup_id: str) -> bool:
    count, since = _degraded_failures.get(lookup_id, (0, 0.0))
    return (count >= settings.API_KEY_FAILED_VERIFY_LIMIT
            and time.monotonic() - since < settings.API_KEY_FAILED_VERIFY_WINDOW_SECONDS)


def _local_failure_add(lookup_id: str) -> None:
    with _degraded_lock:
        count, since = _degraded_failures.get(lookup_id, (0, 0.0))
        if time.monotonic() - since >= settings.API_KEY_FAILED_VERIFY_WINDOW_SECONDS:
            count, since = 0, time.monotonic()
        if len(_degraded_failures) >= _DEGRADED_MEMORY:
            _degraded_failures.clear()
        _degraded_failures[lookup_id] = (count + 1, since)


def _verify_without_cache(parsed: keys.ParsedKey, fingerprint: str) -> CachedKey | None:
    row = (ApiKey.objects.filter(lookup_id=parsed.lookup_id, revoked_at__isnull=True)
           .values("id", "account_id", "key_hash").first())
    if row is None:
        return None
    memory = (parsed.lookup_id, row["key_hash"])
    known = _degraded_verified.get(memory)
    if known is None or not hmac.compare_digest(known, fingerprint):
        if _local_failures_exceeded(parsed.lookup_id):
            return None
        try:
            _hasher().verify(row["key_hash"], parsed.plaintext)
        except (VerificationError, InvalidHashError):
            _local_failure_add(parsed.lookup_id)
            return None
        with _degraded_lock:
            if len(_degraded_verified) >= _DEGRADED_MEMORY:
                _degraded_verified.clear()
            _degraded_verified[memory] = fingerprint
    return CachedKey(row["id"], row["account_id"], fingerprint, time.time())


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
