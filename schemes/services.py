"""Functions that write scheme events."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from streaming import live

from .models import DetectorCheckpoint, SchemeEvent


def scheme_events_store(*, pair, detections: list[dict]) -> list[SchemeEvent]:
    """Store detections (dicts of the detector's fields); the ones already stored (same
    pair, scheme, side and build start) are skipped. Returns the new rows, after which
    the live feed is told of them when the caller's transaction commits.

    Ingestion calls this after writing the step's bars and registering their publication,
    so live the events follow those bars; each row keeps the latest stored bar as its
    place in the feed (`after_bar_ms`), where a resumed stream replays it."""
    from market.models import SecondBar

    after_bar_ms = SecondBar.objects.filter(pair=pair).order_by("-ts_ms").values_list("ts_ms", flat=True).first() or 0
    stored = []
    for item in detections:
        build = item.get("build") or {}
        row, created = SchemeEvent.objects.get_or_create(
            pair=pair, scheme=item["scheme"], side=item["side"],
            build_start_ms=int(build.get("start_ms", item["ts_ms"])),
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


def _publish(pair, rows: list[SchemeEvent]) -> None:
    live.publish_scheme_events(pair_id=pair.pk, events=[row.as_dict() for row in rows])


def scheme_events_purge(*, now_ms: int) -> int:
    cutoff = now_ms - settings.SCHEMES_RETENTION_HOURS * 3_600_000
    deleted, _ = SchemeEvent.objects.filter(ts_ms__lt=cutoff).delete()
    return deleted


def detector_checkpoints_save(*, checkpoints: list[tuple]) -> None:
    """Keep each pair's detector state as of its cursor: (pair, cursor_ms, state) items, in
    one statement (call inside the ingestion tick's transaction)."""
    rows = [DetectorCheckpoint(pair=pair, cursor_ms=cursor_ms, state=state) for pair, cursor_ms, state in checkpoints]
    if rows:
        DetectorCheckpoint.objects.bulk_create(rows, update_conflicts=True, unique_fields=["pair"],
                                               update_fields=["cursor_ms", "state", "updated_at"])
