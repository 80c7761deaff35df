"""Notifications other apps act on (open SSE streams close on these)."""

from django.dispatch import Signal

api_key_revoked = Signal()  # kwargs: key_id, account_id
payment_lapsed = Signal()  # kwargs: account_id
