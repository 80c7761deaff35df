"""Running the detectors inside ingestion: one engine per pair, fed the same events as
the bar builder. Its state is checkpointed in the ingestion step's transaction; a
restarted worker restores the checkpoint and replays the events from there to the
cursor, so it finds exactly what was found before (stored once by the unique key) and
a restart neither loses nor repeats an event. Without a checkpoint (a new pair, or one
older than SCHEMES_WARMUP_MINUTES) the engine is warmed up on the recent past instead."""

from __future__ import annotations

from django.conf import settings

from market.bars import floor_ms


def depth_batch_ms(ref, source) -> int:
    """How long the pair's depth feed nets its updates (0: one update per event, as the
    simulator sends them). Recordings of an exchange net as the exchange did."""
    if source.name == "simulator":
        return 0
    return settings.DEPTH_BATCH_MS.get(ref.exchange, 0)


class PairDetection:
    def __init__(self, ref, source, engine=None):
        from .detectors.engine import DetectorEngine

        if engine is None:
            tick = source.tick_size(ref) if hasattr(source, "tick_size") else None
            engine = DetectorEngine(ref, tick_size=tick, batch_ms=depth_batch_ms(ref, source))
        self.engine = engine
        self.ref = ref
        self.checkpoint_ms: int | None = None

    @classmethod
    def warmed_up(cls, ref, source, cursor_ms: int, checkpoint=None) -> tuple[PairDetection, list[dict], bool]:
        """An engine brought to the cursor, what it detected on the way, and whether that
        was a replay of live detection (from a checkpoint: keep what it found) or a cold
        warm-up (baselines start empty: what it finds is not what was found live)."""
        from .detectors.engine import DetectorEngine

        oldest = cursor_ms - settings.SCHEMES_WARMUP_MINUTES * 60_000
        if checkpoint is not None and oldest <= checkpoint.cursor_ms <= cursor_ms:
            try:
                detection = cls(ref, source, DetectorEngine.restore(bytes(checkpoint.state)))
            except Exception:  # a checkpoint from another version of the engine: warm up instead
                detection = None
            if detection is not None:
                detection.checkpoint_ms = checkpoint.cursor_ms
                found = []
                for event in source.events(ref, checkpoint.cursor_ms, cursor_ms):
                    found.extend(detection.feed(event))
                return detection, found, True
        detection = cls(ref, source)
        start = floor_ms(oldest, "minute")
        found = []
        for event in source.events(ref, start, cursor_ms):
            found.extend(detection.feed(event))
        return detection, found, False

    def feed(self, event) -> list[dict]:
        return [item.to_dict() for item in self.engine.feed(event)]

    def state(self) -> bytes:
        return self.engine.state()
