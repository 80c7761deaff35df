from datetime import datetime, timezone

from django.db import models
from django.db.models import Q

from market.models import PairCheckpoint


class SchemeEvent(models.Model):
    """A detected spoofing scheme, kept SCHEMES_RETENTION_HOURS (720 h). Unique per pair,
    scheme, side and build start, so re-detecting the same episode (after a worker
    restart) stores nothing twice."""

    class Scheme(models.TextChoices):
        FLIPPING = "flipping"
        VACUUMING = "vacuuming"
        LAYERING = "layering"

    pair = models.ForeignKey("market.Pair", on_delete=models.CASCADE, related_name="scheme_events")
    scheme = models.CharField(max_length=12, choices=Scheme.choices)
    direction = models.CharField(max_length=4)
    side = models.CharField(max_length=3)
    ts_ms = models.BigIntegerField(help_text="Detection time, epoch ms")
    build_start_ms = models.BigIntegerField()
    after_bar_ms = models.BigIntegerField(
        default=0, help_text="The pair's latest second bar when the event was stored: the live feed sends "
                             "the event right after that bar, and a resumed stream replays it there")
    price = models.FloatField(null=True)
    confidence = models.FloatField()
    alert_score = models.FloatField()
    build = models.JSONField(default=dict)
    collapse = models.JSONField(default=dict)

    # In PostgreSQL the table is partitioned by day of build start (migration 0004): the
    # unique key holds it, and a unique key of a partitioned table must. The database's
    # primary key is (id, build_start_ms); id stays unique, from its own sequence.
    partition_span = "day"
    partition_key = "build_start_ms"

    class Meta:
        ordering = ["-ts_ms", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["pair", "scheme", "side", "build_start_ms"], name="scheme_event_once"),
            models.CheckConstraint(condition=Q(direction__in=["up", "down"]), name="scheme_direction_valid"),
            models.CheckConstraint(condition=Q(side__in=["bid", "ask"]), name="scheme_side_valid"),
            models.CheckConstraint(condition=Q(confidence__gte=0) & Q(confidence__lte=0.95),
                                   name="scheme_confidence_range"),
            models.CheckConstraint(condition=Q(alert_score__gte=0) & Q(alert_score__lte=100),
                                   name="scheme_alert_score_range"),
        ]
        indexes = [models.Index(fields=["pair", "-ts_ms"], name="scheme_pair_recent")]

    def __str__(self) -> str:
        detected = datetime.fromtimestamp(self.ts_ms / 1000, tz=timezone.utc)
        return f"{self.scheme} {self.side} {self.direction} on {self.pair} at {detected:%Y-%m-%d %H:%M:%S} UTC"

    def as_dict(self) -> dict:
        return {"id": self.pk, "ts_ms": self.ts_ms, "scheme": self.scheme, "direction": self.direction,
                "side": self.side, "price": self.price, "confidence": self.confidence,
                "alert_score": self.alert_score, "build": self.build, "collapse": self.collapse}


class DetectorCheckpoint(PairCheckpoint):
    """The detector engine of a pair as it stood at `cursor_ms` (every event before it
    fed), saved in the ingestion step's transaction with each book checkpoint
    (INGESTION_BOOK_CHECKPOINT_SECONDS). A
    restarted worker restores it and replays the events from there to the ingestion
    cursor: the engine is deterministic, so it finds exactly what the lost worker found
    (stored once by SchemeEvent's unique key) and nothing else."""

    pair = models.OneToOneField("market.Pair", on_delete=models.CASCADE, related_name="detector_checkpoint")
