"""Functions that read accounts and keys."""

from django.db.models import QuerySet

from config.recent import RecentLookups

from .models import KEYS_PER_ACCOUNT, Account, ApiKey, User

# An account and its plan, as the requests and stream connects of this process read them: a
# plan edit or a payment change reaches every process within ACCOUNT_CACHE_SECONDS
# (revocation is the key cache's, accounts.services).
_recent_accounts = RecentLookups("ACCOUNT_CACHE_SECONDS")


def account_recent(*, account_id: int) -> Account | None:
    """The account with its plan, as read at most ACCOUNT_CACHE_SECONDS ago (shared, read-only)."""
    return _recent_accounts.get((account_id,), lambda: Account.objects.select_related("plan").filter(
        pk=account_id).first())


def account_if_recent(*, account_id: int) -> Account | None:
    """`account_recent`'s answer if this process read it within ACCOUNT_CACHE_SECONDS, else
    None (no database read: for a request served on the event loop)."""
    return _recent_accounts.fresh((account_id,))


def api_keys_live(*, account: Account) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(account=account, revoked_at__isnull=True).order_by("created_at")


def api_key_cap_reached(*, account: Account) -> bool:
    return api_keys_live(account=account).count() >= KEYS_PER_ACCOUNT


def api_key_of_account(*, account: Account, key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(account=account, pk=key_id).first()


def user_with_pending_signup(*, email: str):
    """The user who signed up with this address and has not followed the link yet, or None."""
    return User.objects.filter(email=(email or "").strip().lower(), signup_pending=True).first()
