"""Verifying a presented API key: the process's own copy, the shared key cache, the
database with one argon2 verify, and without the shared cache (degraded mode). Key
lifecycle (create, rename, revoke) writes in accounts.services."""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from django.conf import settings
from django.core.cache import cache

from config import clock

from . import key_cache, keys
from .models import ApiKey


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


def key_hasher() -> PasswordHasher:
    """The argon2 hasher a key's secret is stored with (at creation) and checked by."""
    return PasswordHasher(**settings.API_KEY_ARGON2)


def _pepper() -> bytes:
    return settings.API_KEY_PEPPER.encode("utf-8")


def key_cache_name(lookup_id: str) -> str:
    return f"apikey:{lookup_id}"


def _failures_cache_name(lookup_id: str) -> str:
    return f"apikey-fail:{lookup_id}"


# Keys this process verified, reused without asking the shared cache until they are due
# for their recheck (API_KEY_RECHECK_SECONDS after the database last said they are live):
# a round trip to Redis was a quarter of a counted request's cost on a loaded server
# (docs/BENCHMARKS.md). A revoke's tombstone reaches the other processes when their copy
# falls due, so no process accepts a revoked key for longer than the recheck interval.
_verified_here: dict[str, CachedKey] = {}  # lookup id -> entry
_VERIFIED_HERE_MEMORY = 100_000


_NOT_HERE = object()


def verified_here_forget(lookup_id: str) -> None:
    """Drop this process's own copy of a key's verified entry (the key was just revoked)."""
    _verified_here.pop(lookup_id, None)


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
        key_hasher().verify(row["key_hash"], parsed.plaintext)
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
            key_hasher().verify(row["key_hash"], parsed.plaintext)
        except (VerificationError, InvalidHashError):
            _local_failure_add(parsed.lookup_id)
            return None
        with _degraded_lock:
            if len(_degraded_verified) >= _DEGRADED_MEMORY:
                _degraded_verified.clear()
            _degraded_verified[memory] = fingerprint
    return CachedKey(row["id"], row["account_id"], fingerprint, time.time())
