"""Functions that read scheme events."""

from __future__ import annotations

from .models import SchemeEvent


def scheme_history(*, pair, start_ms: int, end_ms: int, limit: int) -> list[dict]:
    """Events of the window, newest first, at most `limit`."""
    rows = SchemeEvent.objects.filter(pair=pair, ts_ms__gte=start_ms, ts_ms__lte=end_ms).order_by("-ts_ms", "-id")
    return [row.as_dict() for row in rows[:limit]]


def scheme_events_since(*, pair, after_id: int, since_ms: int) -> list[tuple[int, dict]]:
    """For SSE resume: events after the client's last one, within the replay window, each
    with the bar it follows in the feed."""
    rows = SchemeEvent.objects.filter(pair=pair, id__gt=after_id, ts_ms__gte=since_ms).order_by("id")[:1000]
    return [(row.after_bar_ms, row.as_dict()) for row in rows]


def detector_checkpoint_get(*, pair):
    """The pair's saved detector state, or None."""
    from .models import DetectorCheckpoint

    return DetectorCheckpoint.objects.filter(pair=pair).only("cursor_ms", "state").first()
