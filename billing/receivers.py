"""Billing's answers to what the apps below it announce (accounts.signals)."""

from django.dispatch import receiver

from accounts.signals import account_signing_up

from .services import plan_free


@receiver(account_signing_up, dispatch_uid="billing.start_signup_on_its_plan")
def start_signup_on_its_plan(sender, account, **kwargs):
    """A new sign-up starts on the free plan (made with its seeded defaults where nothing
    seeded the plans yet, a fresh production database)."""
    account.plan = plan_free()
