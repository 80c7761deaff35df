"""Functions that write subscriptions (and, beside them, the billing ledger and the
ingestion demand)."""

from __future__ import annotations

from django.db import transaction

from accounts.models import Account
from billing.services import pair_period_record
from config import clock
from market.models import Pair

from . import live
from .ingestion import ingestion_unwant, ingestion_want
from .models import METRICS, StreamSubscription


@transaction.atomic
def subscription_upsert(*, account: Account, pair: Pair, metrics: list[str]) -> tuple[StreamSubscription, bool]:
    """Subscribe: idempotent and additive, the metric set only ever grows here."""
    Account.objects.select_for_update().get(pk=account.pk)  # one writer per account at a time
    subscription, created = StreamSubscription.objects.get_or_create(
        account=account, pair=pair, defaults={m: m in metrics for m in METRICS})
    if not created:
        changed = [m for m in metrics if not getattr(subscription, m)]
        for metric in changed:
            setattr(subscription, metric, True)
        if changed:
            subscription.save()
    pair_period_record(account=account, pair=pair, metrics=subscription.metrics, now=clock.utcnow())
    ingestion_want(pair=pair)
    return subscription, created


@transaction.atomic
def subscription_remove(*, account: Account, pair: Pair, metric: str | None = None) -> None:
    """Unsubscribe the pair, or one metric of it; removing what is not there is fine."""
    Account.objects.select_for_update().get(pk=account.pk)
    subscription = StreamSubscription.objects.filter(account=account, pair=pair).first()
    if subscription is None:
        return
    if metric is not None:
        setattr(subscription, metric, False)
    remaining = subscription.metrics if metric is not None else []
    if remaining:
        subscription.save()
    else:
        subscription.delete()
    pair_period_record(account=account, pair=pair, metrics=remaining, now=clock.utcnow())
    if not remaining and not StreamSubscription.objects.filter(pair=pair).exists():
        ingestion_unwant(pair=pair)
    transaction.on_commit(lambda: live.publish_unsubscribed(account_id=account.pk, pair_id=pair.pk,
                                                            metrics=remaining))
