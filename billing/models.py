from decimal import Decimal

from django.db import models
from django.db.models import Q


class Plan(models.Model):
    """What an account may do and how much of it per UTC month. Staff edit these in admin;
    a change takes effect on the next request."""

    FEATURE_API = "api"
    FEATURE_STREAMING = "streaming"
    FEATURES = (FEATURE_API, FEATURE_STREAMING)

    name = models.SlugField(max_length=40, unique=True)
    has_api = models.BooleanField("feature: api", default=False,
                                  help_text="Series, snapshot and control-plane endpoints.")
    has_streaming = models.BooleanField("feature: streaming", default=False,
                                        help_text="/streams*, /rank/top and the SSE feed.")
    monthly_requests = models.BigIntegerField(default=0)
    monthly_bytes = models.BigIntegerField(default=0)
    pair_price_usd = models.DecimalField(
        max_digits=10, decimal_places=2, default=Decimal("0"),
        help_text="Price per streamed pair per month; billed pro rata per pair-day.")
    monthly_price_usd = models.DecimalField(
        max_digits=10, decimal_places=2, default=Decimal("0"),
        help_text="The plan's own price per month, as its Stripe price charges it (shown on the plan page).")
    stripe_price_id = models.CharField(
        "Stripe price id", max_length=255, blank=True, default="",
        help_text="The recurring Stripe price (price_...) Checkout sells this plan with; "
                  "empty: upgrading to it is arranged with staff.")
    is_public = models.BooleanField(
        "listed", default=True,
        help_text="Shown on the plan and landing pages; off for plans made for one customer.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["monthly_requests", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(monthly_requests__gte=0), name="plan_requests_nonnegative"),
            models.CheckConstraint(condition=Q(monthly_bytes__gte=0), name="plan_bytes_nonnegative"),
            models.CheckConstraint(condition=Q(pair_price_usd__gte=0), name="plan_pair_price_nonnegative"),
            models.CheckConstraint(condition=Q(monthly_price_usd__gte=0), name="plan_monthly_price_nonnegative"),
            # a webhook's price id must name one plan
            models.UniqueConstraint(fields=["stripe_price_id"], condition=~Q(stripe_price_id=""),
                                    name="plan_one_plan_per_stripe_price"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def allows_streaming(self) -> bool:
        """Streaming needs the API too: /streams*, /rank/top and the SSE feed."""
        return self.has_api and self.has_streaming

    @property
    def features(self) -> list[str]:
        return [f for f, on in ((self.FEATURE_API, self.has_api),
                                (self.FEATURE_STREAMING, self.has_streaming)) if on]


class UsageCounter(models.Model):
    """Requests and served response bytes of an account for one UTC month or day. Written
    only by atomic upserts (billing.metering), so concurrent servers never lose a count."""

    class Period(models.TextChoices):
        MONTH = "month", "Month"
        DAY = "day", "Day"

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="usage")
    period = models.CharField(max_length=5, choices=Period.choices)
    period_start = models.DateField()
    requests = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["account", "period", "period_start"], name="usage_one_row_per_period"),
            models.CheckConstraint(condition=Q(requests__gte=0) & Q(bytes__gte=0), name="usage_nonnegative"),
            models.CheckConstraint(condition=Q(period__in=["month", "day"]), name="usage_period_valid"),
        ]
        indexes = [models.Index(fields=["account", "period", "-period_start"], name="usage_account_recent")]

    def __str__(self) -> str:
        when = f"{self.period_start:%Y-%m}" if self.period == self.Period.MONTH else f"{self.period_start:%Y-%m-%d}"
        return f"{self.account.name} / {when}"


class PairBillingPeriod(models.Model):
    """The ledger of streamed pairs: one row per continuous stretch in which an account
    subscribed a pair with a given set of metrics. Changing the metrics closes the stretch
    and opens the next one; at most one stretch per account and pair is open."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="pair_periods")
    pair = models.ForeignKey("market.Pair", on_delete=models.PROTECT, related_name="+")
    metrics = models.CharField(max_length=40, help_text="Comma-separated: trade,book,quote")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(fields=["account", "pair"], condition=Q(ended_at__isnull=True),
                                    name="billing_one_open_period_per_pair"),
            models.CheckConstraint(condition=Q(ended_at__isnull=True) | Q(ended_at__gte=models.F("started_at")),
                                   name="billing_period_ends_after_start"),
        ]
        indexes = [models.Index(fields=["account", "started_at"], name="billing_period_account")]

    def __str__(self) -> str:
        ended = f"{self.ended_at:%Y-%m-%d}" if self.ended_at else "open"
        return f"{self.account.name} / {self.pair.path} / {self.started_at:%Y-%m-%d} to {ended}"


class StripeCustomer(models.Model):
    """Which Stripe customer pays for an account, and its current subscription. Written by
    the webhooks only (billing.services); `standing_as_of` is the creation time of the last
    Stripe event applied to the account, so an event Stripe delivers late never undoes a
    newer one."""

    account = models.OneToOneField("accounts.Account", on_delete=models.CASCADE, related_name="stripe_customer")
    customer_id = models.CharField("Stripe customer id", max_length=255, unique=True)
    subscription_id = models.CharField("Stripe subscription id", max_length=255, blank=True, default="")
    standing_as_of = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(customer_id__startswith="cus_"), name="stripe_customer_id_form"),
        ]

    def __str__(self) -> str:
        return f"{self.customer_id} ({self.account})"


class StripeEvent(models.Model):
    """A Stripe webhook event we processed, once: Stripe delivers an event at least once
    and retries it until we answer 2xx, so the unique event id makes a replay a no-op."""

    event_id = models.CharField(max_length=255, unique=True)
    type = models.CharField(max_length=100)
    account = models.ForeignKey("accounts.Account", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    outcome = models.CharField(max_length=200, help_text="What the event did to the account, or why nothing.")
    created_at = models.DateTimeField(help_text="When Stripe created the event.")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at"]
        indexes = [models.Index(fields=["account", "-received_at"], name="stripe_event_account")]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"


class KeyEndpointUsage(models.Model):
    """Requests and served response bytes of one API key on one endpoint (the route, e.g.
    `POST /api/v1/market/candlestick`, never the raw path) in one UTC month. Written by the
    statements that count the account's month (billing.metering), in the same round trip,
    so it costs a counted request no extra trip to the database."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    api_key = models.ForeignKey("accounts.ApiKey", on_delete=models.CASCADE, related_name="usage")
    endpoint = models.CharField(max_length=120)
    month = models.DateField(help_text="First day of the UTC month")
    requests = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    last_request_ms = models.BigIntegerField(help_text="When the last counted request was served (epoch ms)")

    class Meta:
        verbose_name = "usage per key and endpoint"
        verbose_name_plural = "usage per key and endpoint"
        constraints = [
            models.UniqueConstraint(fields=["api_key", "endpoint", "month"], name="key_usage_one_row_per_month"),
            models.CheckConstraint(condition=Q(requests__gte=0) & Q(bytes__gte=0), name="key_usage_nonnegative"),
        ]
        indexes = [models.Index(fields=["account", "month"], name="key_usage_account_month")]

    def __str__(self) -> str:
        return f"{self.api_key.name} · {self.endpoint} · {self.month:%Y-%m}"
