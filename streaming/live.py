"""What the live SSE feed is told: bars after they commit, state changes, and the control
messages that close streams (unsubscribe, key revoked, payment lapsed)."""

from __future__ import annotations

import logging
import time

from django.conf import settings

from . import hub, snapshot

logger = logging.getLogger(__name__)
ALL_METRICS = ["trade", "book", "quote"]


def on_bars(pair, bars) -> None:
    """Live bars only: a catch-up after downtime is history (snapshot, or Last-Event-ID)."""
    horizon = (time.time() - settings.SSE_LIVE_BAR_MAX_AGE_SECONDS) * 1000
    supply = pair.base.circulating_supply
    for bar in bars:
        if bar.ts_ms >= horizon:
            _safely(hub.publish, hub.pair_channel(pair.pk), "bar", snapshot.row(bar, ALL_METRICS, supply, pair.rounding))


def on_status(pair_id: int, status: dict) -> None:
    _safely(hub.publish, hub.pair_channel(pair_id), "status", status)


def on_subscription_change(account_id: int, pair_id: int, metrics: list[str]) -> None:
    _safely(hub.publish, hub.CONTROL, "control",
            {"kind": "unsubscribed", "account_id": account_id, "pair_id": pair_id, "metrics": metrics})


def on_key_revoked(sender, key_id: int, account_id: int, **kwargs) -> None:
    _safely(hub.publish, hub.CONTROL, "control", {"kind": "revoked", "key_id": key_id, "account_id": account_id})


def on_payment_lapsed(sender, account_id: int, **kwargs) -> None:
    _safely(hub.publish, hub.CONTROL, "control", {"kind": "lapsed", "account_id": account_id})


def _safely(publish, *args) -> None:
    try:
        publish(*args)
    except Exception:  # the data is committed; a client resumes from it with Last-Event-ID
        logger.warning("Could not publish a live event on %s", args[0], exc_info=True)


def connect() -> None:
    from accounts import signals

    from . import publish

    publish.subscribe_bars(on_bars)
    publish.subscribe_subscription_changes(on_subscription_change)
    signals.api_key_revoked.connect(on_key_revoked, dispatch_uid="streaming.live.revoked")
    signals.payment_lapsed.connect(on_payment_lapsed, dispatch_uid="streaming.live.lapsed")
