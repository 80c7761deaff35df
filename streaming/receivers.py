"""The live feed's answers to what the apps below it announce (accounts.signals, schemes.signals)."""

from django.dispatch import receiver

from accounts.signals import account_payment_lapsed, api_key_revoked
from schemes.signals import scheme_events_stored

from . import live


@receiver(api_key_revoked, dispatch_uid="streaming.close_streams_of_revoked_key")
def close_streams_of_revoked_key(sender, key_id, account_id, **kwargs):
    live.publish_key_revoked(key_id=key_id, account_id=account_id)


@receiver(account_payment_lapsed, dispatch_uid="streaming.close_streams_of_lapsed_account")
def close_streams_of_lapsed_account(sender, account_id, **kwargs):
    live.publish_payment_lapsed(account_id=account_id)


@receiver(scheme_events_stored, dispatch_uid="streaming.publish_stored_scheme_events")
def publish_stored_scheme_events(sender, pair_id, events, **kwargs):
    live.publish_scheme_events(pair_id=pair_id, events=events)
