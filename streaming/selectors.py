"""Functions that read subscriptions, stream status, snapshots and live bars."""

from __future__ import annotations

import functools

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import Sum

from config import clock
from config.recent import RecentLookups
from market import bar_pack
from market.bars import BAR_FIELDS, DAY_MS, Bar, floor_ms
from market.models import MinuteBar, Pair

from .models import METRICS, IngestionState, StreamSubscription
from .live import live_bar_key
from .status import Thresholds, derive_state, worst


def thresholds() -> Thresholds:
    return Thresholds(ready_coverage=settings.STREAM_READY_COVERAGE,
                      stale_after_ms=settings.STREAM_STALE_AFTER_SECONDS * 1000,
                      failed_after_ms=settings.STREAM_FAILED_AFTER_SECONDS * 1000)


def subscription_get(*, account, pair: Pair) -> StreamSubscription | None:
    return StreamSubscription.objects.filter(account=account, pair=pair).first()


def subscriptions_of(*, account) -> dict[int, StreamSubscription]:
    return {s.pair_id: s for s in StreamSubscription.objects.filter(account=account)}


def account_subscriptions(*, account):
    """The account's subscriptions with their pairs (exchange, base and quote loaded)."""
    return (StreamSubscription.objects.filter(account=account)
            .select_related("pair__exchange", "pair__base", "pair__quote"))


def account_subscription(*, account, subscription_id: int) -> StreamSubscription | None:
    """One of the account's subscriptions, or None (another account's is None too)."""
    return account_subscriptions(account=account).filter(pk=subscription_id).first()


def coverage_24h(*, pair: Pair, now: int) -> float:
    """Share of the last 24 hours for which the pair has second bars (each second bar holds
    one book sample, summed in the minute roll-ups)."""
    return _coverages_24h([pair.pk], now).get(pair.pk, 0.0)


def _coverages_24h(pair_ids: list[int], now: int) -> dict[int, float]:
    start = floor_ms(now - DAY_MS, "minute")
    seconds = (MinuteBar.objects.filter(pair_id__in=pair_ids, ts_ms__gte=start, ts_ms__lt=now)
               .values("pair_id").annotate(seconds=Sum("book_samples")).values_list("pair_id", "seconds"))
    return {pair_id: round(min((total or 0) / 86_400, 1.0), 4) for pair_id, total in seconds}


# A pair's ingestion signals (its state row and 24-hour coverage) as stream connects and
# status requests of this process read them: they move once a second, and a thousand
# clients connecting to one pair need one read, not a thousand.
_recent_signals = RecentLookups("PAIR_STATUS_CACHE_SECONDS")


def pairs_signals(*, pairs: list[Pair], now: int) -> dict[int, tuple[IngestionState | None, float]]:
    """Each pair's ingestion state row and 24-hour coverage (0 until it was heard from), in
    two statements whatever the number of pairs."""
    states = {state.pair_id: state for state in IngestionState.objects.filter(pair__in=pairs)}
    heard = [pair_id for pair_id, state in states.items() if state.heartbeat_at]
    coverages = _coverages_24h(heard, now) if heard else {}
    return {pair.pk: (states.get(pair.pk), coverages.get(pair.pk, 0.0)) for pair in pairs}


_UNREAD = object()


def pair_status(*, pair: Pair, account, subscribed=_UNREAD, recent: bool = False, signals=None) -> dict:
    """The pair's stream status as `account` sees it. `subscribed`: the metrics the account
    subscribes to on the pair (None: none) when the caller has read them already; `recent`:
    the ingestion signals may be up to PAIR_STATUS_CACHE_SECONDS old (readers; ingestion,
    which writes them, reads them fresh); `signals`: the pair's entry of `pairs_signals`
    when the caller read many pairs' at once."""
    now = clock.now_ms()
    if signals is None:
        def read():
            return pairs_signals(pairs=[pair], now=now)[pair.pk]
        signals = _recent_signals.get((pair.pk,), read) if recent else read()
    state, coverage = signals
    if subscribed is _UNREAD:
        subscription = subscription_get(account=account, pair=pair)
        subscribed = subscription.metrics if subscription else []
    subscribed = subscribed or []
    heartbeat = int(state.heartbeat_at.timestamp() * 1000) if state and state.heartbeat_at else None
    age = max(now - heartbeat, 0) if heartbeat is not None else None
    fatal = bool(state and state.fatal)
    seen = {"trade": state and state.trade_seen_ms, "book": state and state.book_seen_ms,
            "quote": state and state.quote_seen_ms}
    limits = thresholds()
    metrics = {}
    for metric in METRICS:
        metric_heartbeat = heartbeat if seen[metric] else None
        metric_age = age if metric_heartbeat is not None else None
        metrics[metric] = {
            "subscribed": metric in subscribed,
            "state": derive_state(heartbeat_age_ms=metric_age, coverage=coverage, fatal=fatal, thresholds=limits),
            "coverage_24h": coverage if metric_heartbeat is not None else 0.0,
            "heartbeat_ms": metric_heartbeat,
        }
    considered = subscribed or list(METRICS)
    body = {
        "exchange": pair.exchange.slug, "base": pair.base.symbol, "quote": pair.quote.symbol,
        "subscribed": bool(subscribed),
        "state": worst(metrics[m]["state"] for m in considered),
        "signals": {"coverage_24h": coverage, "heartbeat_ms": heartbeat, "heartbeat_age_ms": age},
        "metrics": metrics,
    }
    if state and state.last_error:
        body["signals"]["last_error"] = state.last_error
    if state and state.feed:
        body["signals"]["source"] = state.feed
    if state and state.gaps:
        body["signals"]["gaps"] = state.gaps
    return body


def live_bar(*, pair: Pair) -> Bar | None:
    bar = cache.get(live_bar_key(pair.pk))
    return bar if isinstance(bar, Bar) else None


def snapshot_upper_bound(*, pair: Pair, to_ms: int) -> int:
    """Bars below the committed cursor never change in number, so bounding a snapshot by
    it makes the announced count and the streamed rows agree."""
    state = IngestionState.objects.filter(pair=pair).values_list("cursor_ms", flat=True).first()
    return min(to_ms, state) if state is not None else to_ms


# -- SSE resume ----------------------------------------------------------------------------

def stream_opening(*, account_id: int, pair: Pair) -> tuple[list[str] | None, tuple[int, int]]:
    """What a stream connect reads, in one statement: the metrics the account subscribes to
    on the pair (None: not subscribed) and where a fresh stream of the pair starts, its
    latest stored second bar and latest scheme event, so an id sent before any event is the
    client's true position (resuming from it replays nothing from before the connect). Read
    fresh: a position even a moment old would replay, on resume, events the client saw
    before it connected."""
    with connection.cursor() as cursor:
        cursor.execute(_stream_opening_sql(), [pair.pk, pair.pk, pair.pk, pair.pk, account_id, pair.pk])
        *flags, bar_ts, pack_minute, pack_seconds, scheme_id = cursor.fetchone()
    if pack_minute is not None:  # the latest second bar may be in the packed tier (market/bar_pack.py)
        bar_ts = max(bar_ts or 0, bar_pack.last_ts(pack_minute, pack_seconds))
    metrics = [metric for metric, on in zip(METRICS, flags) if on] if flags[0] is not None else None
    return metrics, (bar_ts or 0, scheme_id or 0)


@functools.cache
def _stream_opening_sql() -> str:
    from market.models import SecondBar, SecondBarPack
    from schemes.models import SchemeEvent

    def table(model) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    flags = ", ".join(f"s.{connection.ops.quote_name(metric)}" for metric in METRICS)
    last_pack = f"FROM {table(SecondBarPack)} WHERE pair_id = %s ORDER BY minute_ts_ms DESC LIMIT 1"
    return (f"SELECT {flags}, (SELECT MAX(ts_ms) FROM {table(SecondBar)} WHERE pair_id = %s), "
            f"(SELECT minute_ts_ms {last_pack}), (SELECT seconds {last_pack}), "
            f"(SELECT MAX(id) FROM {table(SchemeEvent)} WHERE pair_id = %s) "
            f"FROM (SELECT 1) AS one LEFT JOIN {table(StreamSubscription)} AS s "
            f"ON s.account_id = %s AND s.pair_id = %s")


_NO_END = 1 << 62  # a ts_ms past any bar


def parse_cursor(text: str) -> tuple[int, int] | None:
    """An SSE event id `<last bar ts_ms>.<last scheme event id>`; None when malformed."""
    head, _, tail = text.strip().partition(".")
    try:
        return int(head), int(tail or 0)
    except ValueError:
        return None


def replay_since(*, pair: Pair, cursor: str) -> tuple[list, dict | None]:
    """What a resuming client missed: second bars after its last bar and scheme events
    after its last event, in the order the live feed sent them (each scheme event right
    after the bar it was stored with, see SchemeEvent.after_bar_ms), as ("bar", Bar) /
    ("scheme-event", dict); or a reset when the cursor is malformed or older than the
    replay window."""
    from market.selectors import bars_page
    from schemes.selectors import scheme_events_since

    parsed = parse_cursor(cursor)
    horizon = clock.now_ms() - settings.SSE_REPLAY_MAX_SECONDS * 1000
    if parsed is None:
        return [], {"reason": "malformed Last-Event-ID", "last_event_id": cursor[:100]}
    bar_ts, scheme_id = parsed
    if bar_ts < horizon:
        return [], {"reason": "Last-Event-ID is older than the replay window", "last_event_id": cursor[:100],
                    "replay_window_seconds": settings.SSE_REPLAY_MAX_SECONDS}
    rows = bars_page(pair_id=pair.pk, granularity="second", columns=BAR_FIELDS, after_ms=bar_ts, to_ms=_NO_END,
                     limit=settings.SSE_REPLAY_MAX_SECONDS)
    items = [((bar.ts_ms, 0, 0), "bar", bar) for bar in (Bar(*row) for row in rows)]
    items.extend(((after_bar, 1, event["id"]), "scheme-event", event)
                 for after_bar, event in scheme_events_since(pair=pair, after_id=scheme_id, since_ms=horizon))
    items.sort(key=lambda item: item[0])
    return [(kind, payload) for _, kind, payload in items], None


def recent_bar_rows(*, pair: Pair, metrics: list[str], granularity: str, from_ms: int, to_ms: int,
                    limit: int = 1_500) -> list[dict]:
    """Stored bars of the pair with from_ms <= ts_ms < to_ms, as snapshot rows of the
    metrics (the fields and values POST .../snapshot serves), oldest first, at most `limit`."""
    from market.selectors import bars_page

    from . import snapshot

    make = snapshot.page_maker(metrics, pair.base.circulating_supply, pair.rounding)
    return make(bars_page(pair_id=pair.pk, granularity=granularity, columns=snapshot.stored_columns(metrics),
                          after_ms=from_ms - 1, to_ms=to_ms, limit=limit))
