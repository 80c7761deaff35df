"""What the live SSE feed is told: bars after they commit, state changes, and the control
messages that close streams (unsubscribe, key revoked, payment lapsed)."""

from __future__ import annotations

import logging

from . import hub, snapshot

logger = logging.getLogger(__name__)
ALL_METRICS = ["trade", "book", "quote"]


def on_bars(pair, bars) -> None:
    """Every committed bar, catch-ups after downtime included, so an open stream has no gap
    and a resumed one receives exactly what it would have. One event per commit, whatever
    its number of bars: a listener's queue holds a bounded number of events, and a burst of
    bars from the server must not read as a slow client."""
    supply = pair.base.circulating_supply
    rows = [snapshot.row(bar, ALL_METRICS, supply, pair.rounding) for bar in bars]
    if rows:
        _safely(hub.publish, hub.pair_channel(pair.pk), "bars", {"rows": rows})


def publish_scheme_events(pair_id: int, events: list[dict]) -> None:
    """After the scheme events commit; they follow the bars committed with them."""
    for event in events:
        _safely(hub.publish, hub.pair_channel(pair_id), "scheme-event", event)


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
