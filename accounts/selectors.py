"""Functions that read accounts and keys."""

from django.db.models import QuerySet

from config.recent import RecentLookups

from .models import KEYS_PER_ACCOUNT, Account, ApiKey, User

# An account and its plan, as the requests and stream connects of this process read them: a
# plan edit or a payment change reaches every process within ACCOUNT_CACHE_SECONDS
# (revocation is the key cache's, accounts.services).
_recent_accounts = RecentLookups("ACCOUNT_CACHE_SECONDS")


def account_recent(*, account_id: int, held_only: bool = False) -> Account | None:
    """The account with its plan, as read at most ACCOUNT_CACHE_SECONDS ago (shared,
    read-only). held_only: None unless this process holds such a read, with no database
    read (an answer on the event loop)."""
    if held_only:
        return _recent_accounts.fresh((account_id,))
    return _recent_accounts.get((account_id,), lambda: Account.objects.select_related("plan").filter(
        pk=account_id).first())


def api_keys_live(*, account: Account) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(account=account, revoked_at__isnull=True).order_by("created_at")


def api_key_cap_reached(*, account: Account) -> bool:
    return api_keys_live(account=account).count() >= KEYS_PER_ACCOUNT


def api_key_of_account(*, account: Account, key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(account=account, pk=key_id).first()


def user_with_pending_signup(*, email: str):
    """The user who signed up with this address and has not followed the link yet, or None."""
    return User.objects.filter(email=(email or "").strip().lower(), signup_pending=True).first()


REVOKED_KEYS_SHOWN = 50


def api_keys_revoked(*, account: Account) -> QuerySet[ApiKey]:
    """The account's revoked keys, most recently revoked first (the newest
    REVOKED_KEYS_SHOWN: the page's history), with who revoked each."""
    return (ApiKey.objects.filter(account=account, revoked_at__isnull=False).select_related("revoked_by")
            .order_by("-revoked_at", "-pk")[:REVOKED_KEYS_SHOWN])
