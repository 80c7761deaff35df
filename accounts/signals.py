"""What accounts tells the apps above it (DESIGN.md: a lower app never imports upward)."""

from django.dispatch import Signal

# Sent with `account`, a new Account not saved yet, inside the sign-up's transaction: the
# app that owns plans (billing) gives it the plan a new sign-up starts on.
account_signing_up = Signal()
