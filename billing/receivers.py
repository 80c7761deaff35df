"""Billing's answers to what the apps below it announce (accounts.signals)."""

from django.conf import settings
from django.dispatch import receiver

from accounts.signals import account_signing_up

from .models import Plan
from .services import DEFAULT_PLANS, plan_upsert


@receiver(account_signing_up, dispatch_uid="billing.start_signup_on_its_plan")
def start_signup_on_its_plan(sender, account, **kwargs):
    """A new sign-up starts on SIGNUP_PLAN (free), created with its seeded defaults where
    nothing seeded the plans yet (a fresh production database)."""
    name = settings.SIGNUP_PLAN
    account.plan = (Plan.objects.filter(name=name).first()
                    or plan_upsert(name=name, **DEFAULT_PLANS.get(name, {"features": []})))
