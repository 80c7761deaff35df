"""Functions that read accounts and keys."""

from django.db.models import QuerySet

from .models import KEYS_PER_ACCOUNT, Account, ApiKey


def api_keys_live(*, account: Account) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(account=account, revoked_at__isnull=True).order_by("created_at")


def api_key_cap_reached(*, account: Account) -> bool:
    return api_keys_live(account=account).count() >= KEYS_PER_ACCOUNT


def api_key_of_account(*, account: Account, key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(account=account, pk=key_id).first()
