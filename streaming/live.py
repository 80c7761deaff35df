"""The one way to tell the live SSE feed something: every function here is called, on
commit, by the code that committed it. Bars (and the pair's latest live bar in the cache),
scheme events, state changes, and the control messages that close streams (unsubscribe,
key revoked, payment lapsed). A failed publish is logged and dropped: the data is
committed, and a client resumes from it with Last-Event-ID."""

from __future__ import annotations

import logging

from django.core.cache import cache

from . import hub, snapshot

logger = logging.getLogger(__name__)
ALL_METRICS = ["trade", "book", "quote"]
LIVE_BAR_SECONDS = 120


def live_bar_key(pair_id: int) -> str:
    return f"live-bar:{pair_id}"


def publish_bars(*, pair, bars) -> None:
    publish_bars_many([(pair, bars)])


def publish_bars_many(bars_by_pair) -> None:
    """Every committed bar, catch-ups after downtime included, so an open stream has no gap
    and a resumed one receives exactly what it would have. One event per pair and commit,
    whatever its number of bars: a listener's queue holds a bounded number of events, and a
    burst of bars from the server must not read as a slow client. The pairs of an ingestion
    tick go out together: one cache write and one publish round trip for all of them."""
    bars_by_pair = [(pair, bars) for pair, bars in bars_by_pair if bars]
    if not bars_by_pair:
        return
    try:
        cache.set_many({live_bar_key(pair.pk): bars[-1] for pair, bars in bars_by_pair}, timeout=LIVE_BAR_SECONDS)
    except Exception:  # the live view catches up on the next bar
        logger.warning("Could not store the live bars of %d pairs", len(bars_by_pair), exc_info=True)
    events = []
    for pair, bars in bars_by_pair:
        supply = pair.base.circulating_supply
        rows = [snapshot.row(bar, ALL_METRICS, supply, pair.rounding) for bar in bars]
        events.append((hub.pair_channel(pair.pk), "bars", {"rows": rows}))
    try:
        hub.publish_many(events)
    except Exception:
        logger.warning("Could not publish the bars of %d pairs", len(events), exc_info=True)


def publish_scheme_events(*, pair_id: int, events: list[dict]) -> None:
    """After the scheme events commit; they follow the bars committed with them. One event
    per commit, as for bars: a warm-up or a busy step stores dozens at once."""
    if events:
        _safely(hub.pair_channel(pair_id), "scheme-events", {"events": events})


def publish_status(*, pair_id: int, status: dict) -> None:
    _safely(hub.pair_channel(pair_id), "status", status)


def publish_unsubscribed(*, account_id: int, pair_id: int, metrics: list[str]) -> None:
    """The account's open streams of the pair learn what is left (they close on nothing)."""
    _safely(hub.CONTROL, "control",
            {"kind": "unsubscribed", "account_id": account_id, "pair_id": pair_id, "metrics": metrics})


def publish_key_revoked(*, key_id: int, account_id: int) -> None:
    _safely(hub.CONTROL, "control", {"kind": "revoked", "key_id": key_id, "account_id": account_id})


def publish_payment_lapsed(*, account_id: int) -> None:
    _safely(hub.CONTROL, "control", {"kind": "lapsed", "account_id": account_id})


def _safely(channel: str, event_type: str, data: dict) -> None:
    try:
        hub.publish(channel, event_type, data)
    except Exception:
        logger.warning("Could not publish a live event on %s", channel, exc_info=True)
