"""After bars commit: remember the latest live bar of the pair and hand the bars to the
live feed."""

from __future__ import annotations

import logging

from django.core.cache import cache

from market.bars import Bar

logger = logging.getLogger(__name__)
LIVE_BAR_SECONDS = 120

_listeners: list = []


def live_bar_key(pair_id: int) -> str:
    return f"live-bar:{pair_id}"


def subscribe_bars(listener) -> None:
    """listener(pair, bars) is called after every commit of new second bars."""
    _listeners.append(listener)


def publish_bars(*, pair, bars: list[Bar]) -> None:
    if not bars:
        return
    latest = bars[-1]
    try:
        cache.set(live_bar_key(pair.pk), latest, timeout=LIVE_BAR_SECONDS)
    except Exception:  # the bars are committed; the live view catches up on the next bar
        logger.warning("Could not store the live bar of pair %s", pair.pk, exc_info=True)
    for listener in list(_listeners):
        try:
            listener(pair, bars)
        except Exception:
            logger.exception("Bar listener %r failed", listener)


_subscription_listeners: list = []


def subscribe_subscription_changes(listener) -> None:
    """listener(account_id, pair_id, metrics) after an unsubscribe commits."""
    _subscription_listeners.append(listener)


def publish_subscription_change(*, account_id: int, pair_id: int, metrics: list[str]) -> None:
    for listener in list(_subscription_listeners):
        try:
            listener(account_id, pair_id, metrics)
        except Exception:
            logger.exception("Subscription listener %r failed", listener)

