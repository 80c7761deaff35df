"""Functions that write scheme events."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from .models import DetectorCheckpoint, SchemeEvent
from .signals import scheme_events_stored


def scheme_events_store(*, pair, detections: list[dict]) -> list[SchemeEvent]:
    """Store detections (dicts of the detector's fields); the ones already stored (same
    pair, scheme, side and build start) are skipped. Returns the new rows, after which
    the live feed is told of them when the caller's transaction commits.

    Ingestion calls this after writing the step's bars and registering their publication,
    so live the events follow those bars; each row keeps the latest stored bar as its
    place in the feed (`after_bar_ms`), where a resumed stream replays it."""
    from market.partitions import partitions_ensure
    from market.selectors import second_bar_last_ts

    if not detections:
        return []
    after_bar_ms = second_bar_last_ts(pair_id=pair.pk) or 0
    stored = []
    partitions_ensure(SchemeEvent, {_build_start_ms(item) for item in detections})
    for item in detections:
        build = item.get("build") or {}
        row, created = SchemeEvent.objects.get_or_create(
            pair=pair, scheme=item["scheme"], side=item["side"], build_start_ms=_build_start_ms(item),
            defaults={"direction": item["direction"], "ts_ms": int(item["ts_ms"]), "price": item.get("price"),
                      "after_bar_ms": after_bar_ms,
                      "confidence": min(max(float(item["confidence"]), 0.0), 0.95),
                      "alert_score": min(max(float(item["alert_score"]), 0.0), 100.0),
                      "build": build, "collapse": item.get("collapse") or {}})
        if created:
            stored.append(row)
    if stored:
        transaction.on_commit(lambda: _publish(pair, stored))
    return stored


def _build_start_ms(item: dict) -> int:
    return int((item.get("build") or {}).get("start_ms", item["ts_ms"]))


def _publish(pair, rows: list[SchemeEvent]) -> None:
    scheme_events_stored.send(sender=SchemeEvent, pair_id=pair.pk, events=[row.as_dict() for row in rows])


def scheme_events_purge(*, now_ms: int) -> int:
    """Remove events detected before SCHEMES_RETENTION_HOURS. In PostgreSQL whole day
    partitions go (by build start; one goes once every event in it was detected before the
    cutoff; no row is deleted) and the count is of partitions dropped; in SQLite rows are
    deleted and counted."""
    from market.partitions import partitioned, partitions_drop_before

    cutoff = now_ms - settings.SCHEMES_RETENTION_HOURS * 3_600_000
    if partitioned():
        return len(partitions_drop_before(SchemeEvent, cutoff_ms=cutoff, now_ms=now_ms, unless_newer_than="ts_ms"))
    deleted, _ = SchemeEvent.objects.filter(ts_ms__lt=cutoff).delete()
    return deleted


def scheme_event_partitions_upkeep(*, now_ms: int) -> None:
    """Make the partitions of today and the next days ahead of the writes (beat)."""
    from market.partitions import partitions_ahead

    partitions_ahead(SchemeEvent, now_ms=now_ms)


def detector_checkpoints_save(*, checkpoints: list[tuple]) -> None:
    """Keep each pair's detector state as of its cursor: (pair, cursor_ms, state) items, in
    one statement (call inside the ingestion tick's transaction)."""
    rows = [DetectorCheckpoint(pair=pair, cursor_ms=cursor_ms, state=state) for pair, cursor_ms, state in checkpoints]
    if rows:
        DetectorCheckpoint.objects.bulk_create(rows, update_conflicts=True, unique_fields=["pair"],
                                               update_fields=["cursor_ms", "state", "updated_at"])
