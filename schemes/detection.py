"""Running the detectors inside ingestion: one engine per pair, fed the same events as
the bar builder, rebuilt after a restart by replaying the recent past (the baselines
need SCHEMES_WARMUP_MINUTES of history); what the replay re-detects is already stored
and is skipped by the unique key, so a restart neither loses nor repeats an event."""

from __future__ import annotations

from django.conf import settings

from market.bars import floor_ms


class PairDetection:
    def __init__(self, ref, source):
        from .detectors.engine import DetectorEngine

        tick = source.tick_size(ref) if hasattr(source, "tick_size") else None
        self.engine = DetectorEngine(ref, tick_size=tick)
        self.ref = ref

    @classmethod
    def warmed_up(cls, ref, source, cursor_ms: int) -> tuple[PairDetection, list[dict]]:
        """A fresh engine brought to the cursor, with what it detected on the way."""
        detection = cls(ref, source)
        start = floor_ms(cursor_ms - settings.SCHEMES_WARMUP_MINUTES * 60_000, "minute")
        found = []
        for event in source.events(ref, start, cursor_ms):
            found.extend(detection.feed(event))
        return detection, found

    def feed(self, event) -> list[dict]:
        return [item.to_dict() for item in self.engine.feed(event)]
