"""What accounts tells the apps above it (DESIGN.md: a lower app never imports upward)."""

from django.dispatch import Signal

# Sent with `account`, a new Account not saved yet, inside the sign-up's transaction: the
# app that owns plans (billing) gives it the plan a new sign-up starts on.
account_signing_up = Signal()

# Sent with `key_id` and `account_id` once a key's revocation is committed: the live feed
# (streaming) closes the streams opened with the key.
api_key_revoked = Signal()

# Sent with `account_id` once an account's payment lapsed (committed): the live feed
# (streaming) closes the account's open streams.
account_payment_lapsed = Signal()
