from django.db import models
from django.db.models import Q

from market.models import PairCheckpoint


class IngestionState(models.Model):
    """Where ingestion of a pair stands. The cursor moves only in the transaction that
    wrote the bars up to it, so a worker killed mid-batch loses and repeats nothing.

    `wanted` is true while at least one account subscribes (or staff pin the pair);
    `lease_owner` / `lease_until` say which worker owns the pair; `heartbeat_at` is the
    last commit, read by the status endpoint and by the supervisor."""

    pair = models.OneToOneField("market.Pair", on_delete=models.CASCADE, related_name="ingestion")
    wanted = models.BooleanField(default=False, db_index=True)
    unwanted_since = models.DateTimeField(null=True, blank=True,
                                          help_text="Last unsubscribe; ingestion stops after the grace period")
    cursor_ms = models.BigIntegerField(null=True, blank=True, help_text="Events before this are in the bars")
    coverage_from_ms = models.BigIntegerField(null=True, blank=True, help_text="Start of continuous bars")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    trade_seen_ms = models.BigIntegerField(null=True, blank=True)
    book_seen_ms = models.BigIntegerField(null=True, blank=True)
    quote_seen_ms = models.BigIntegerField(null=True, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    handover_to = models.CharField(
        max_length=100, blank=True,
        help_text="An ingestion process below its fair share asked for this pair; the owner hands it over "
                  "once its cursor reaches handover_ready_ms")
    handover_ready_ms = models.BigIntegerField(
        null=True, blank=True,
        help_text="The taker holds every event from this time on (its own feed is live): the owner may hand over")
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    fatal = models.BooleanField(default=False, help_text="The source refused the pair; needs staff")
    feed = models.JSONField(default=dict, blank=True,
                            help_text="A live exchange feed's own signals: state, reason, resyncs, disconnects")
    gaps = models.JSONField(default=list, blank=True,
                            help_text="[from_ms, to_ms) stretches skipped because no worker was listening")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(cursor_ms__isnull=True) | Q(cursor_ms__gte=0),
                                   name="ingestion_cursor_nonnegative"),
            models.CheckConstraint(condition=Q(lease_owner="") | Q(lease_until__isnull=False),
                                   name="ingestion_lease_has_expiry"),
            models.CheckConstraint(condition=Q(handover_to="") | ~Q(handover_to=models.F("lease_owner")),
                                   name="ingestion_handover_to_another"),
        ]

    def __str__(self) -> str:
        return f"ingestion of {self.pair}"


class IngestionWorker(models.Model):
    """An ingestion process that is running: its heartbeat, every loop. The wanted pairs are
    shared evenly among the processes seen within INGESTION_LEASE_SECONDS (each takes its
    fair share of the leases, and asks an owner above its share to hand pairs over)."""

    owner = models.CharField(max_length=100, unique=True, help_text="The lease owner id of the process")
    started_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.owner


class BookCheckpoint(PairCheckpoint):
    """The bar builder of a pair (its order book and carried quote) as it stood at
    `cursor_ms`, saved in the ingestion step's transaction every
    INGESTION_BOOK_CHECKPOINT_SECONDS. A restarted worker restores it and replays the
    source from there to the cursor, so its book is the one the lost worker had, whatever
    the source sends snapshots."""

    pair = models.OneToOneField("market.Pair", on_delete=models.CASCADE, related_name="book_checkpoint")


METRICS = ("trade", "book", "quote")


class StreamSubscription(models.Model):
    """An account's live subscription to a pair: the pair plus the metrics it consumes.
    A row exists only while at least one metric is subscribed."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="stream_subscriptions")
    pair = models.ForeignKey("market.Pair", on_delete=models.PROTECT, related_name="subscriptions")
    trade = models.BooleanField(default=False)
    book = models.BooleanField(default=False)
    quote = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pair__exchange__slug", "pair__base__symbol", "pair__quote__symbol"]
        constraints = [
            models.UniqueConstraint(fields=["account", "pair"], name="subscription_one_per_pair"),
            models.CheckConstraint(condition=Q(trade=True) | Q(book=True) | Q(quote=True),
                                   name="subscription_has_a_metric"),
        ]

    def __str__(self) -> str:
        return f"{self.account} → {self.pair} ({', '.join(self.metrics)})"

    @property
    def metrics(self) -> list[str]:
        return [m for m in METRICS if getattr(self, m)]
