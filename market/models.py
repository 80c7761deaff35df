from django.db import models
from django.db.models import Q
from django.db.models.functions import Mod, Upper
from django.db.models.lookups import Exact


class Exchange(models.Model):
    """A venue and the source that feeds its pairs."""

    class Source(models.TextChoices):
        SIMULATOR = "simulator", "Simulator (deterministic, labelled as simulated)"
        REPLAY = "replay", "Replay of recorded files"
        EXCHANGE = "exchange", "Live exchange (Binance and Coinbase streams; others through ccxt)"

    slug = models.SlugField(max_length=40, unique=True, help_text="Lower case, as in the API path")
    name = models.CharField(max_length=100)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.SIMULATOR)
    ccxt_id = models.CharField(max_length=40, blank=True, help_text="ccxt exchange id for the live source")
    replay_path = models.CharField(max_length=500, blank=True, help_text="File or folder for the replay source")
    replay_loop_from_ms = models.BigIntegerField(
        null=True, blank=True,
        help_text="Play the recording over and over from this time (epoch ms), as a live demo; "
                  "empty: bars at the recording's own timestamps")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(source__in=["simulator", "replay", "exchange"]),
                                   name="exchange_source_valid"),
            models.CheckConstraint(condition=~Q(source="exchange") | ~Q(ccxt_id=""),
                                   name="exchange_live_needs_ccxt_id"),
            models.CheckConstraint(condition=~Q(source="replay") | ~Q(replay_path=""),
                                   name="exchange_replay_needs_path"),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def simulated(self) -> bool:
        return self.source == self.Source.SIMULATOR


class Asset(models.Model):
    """A token, with its market-cap rank from the ranking provider."""

    symbol = models.CharField(max_length=20, unique=True, help_text="Upper case, e.g. BTC")
    name = models.CharField(max_length=100, blank=True)
    market_cap_rank = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    market_cap_usd = models.FloatField(null=True, blank=True)
    circulating_supply = models.FloatField(null=True, blank=True)
    ranked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["symbol"]
        constraints = [
            models.CheckConstraint(condition=Q(symbol=Upper("symbol")), name="asset_symbol_upper"),
        ]

    def __str__(self) -> str:
        return self.symbol


class Pair(models.Model):
    class TradingStatus(models.TextChoices):
        TRADING = "trading", "Trading"
        HALTED = "halted", "Halted by the exchange"
        DELISTED = "delisted", "No longer listed by the exchange"

    exchange = models.ForeignKey(Exchange, on_delete=models.PROTECT, related_name="pairs")
    base = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="base_pairs")
    quote = models.ForeignKey(Asset, on_delete=models.PROTECT, related_name="quote_pairs")
    streamable = models.BooleanField(default=True, help_text="Can be subscribed to and streamed")
    price_increment = models.DecimalField(max_digits=30, decimal_places=18, null=True, blank=True,
                                          help_text="The exchange's tick (prices are served at its decimals)")
    amount_increment = models.DecimalField(max_digits=30, decimal_places=18, null=True, blank=True,
                                           help_text="The exchange's step for quantities in the base asset")
    min_amount = models.DecimalField(max_digits=30, decimal_places=18, null=True, blank=True,
                                     help_text="Smallest order the exchange accepts, in the base asset")
    trading_status = models.CharField(max_length=10, choices=TradingStatus.choices, default=TradingStatus.TRADING)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["exchange__slug", "base__symbol", "quote__symbol"]
        constraints = [
            models.UniqueConstraint(fields=["exchange", "base", "quote"], name="pair_unique"),
            models.CheckConstraint(condition=~Q(base=models.F("quote")), name="pair_two_assets"),
            models.CheckConstraint(condition=Q(price_increment__isnull=True) | Q(price_increment__gt=0),
                                   name="pair_price_increment_positive"),
            models.CheckConstraint(condition=Q(amount_increment__isnull=True) | Q(amount_increment__gt=0),
                                   name="pair_amount_increment_positive"),
            models.CheckConstraint(condition=Q(min_amount__isnull=True) | Q(min_amount__gte=0),
                                   name="pair_min_amount_nonnegative"),
            models.CheckConstraint(condition=Q(trading_status__in=["trading", "halted", "delisted"]),
                                   name="pair_trading_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.exchange_id and self.exchange.slug}/{self.base.symbol}/{self.quote.symbol}"

    @property
    def symbol(self) -> str:
        return f"{self.base.symbol}-{self.quote.symbol}"

    @property
    def path(self) -> str:
        return f"{self.exchange.slug}/{self.base.symbol}/{self.quote.symbol}"

    @property
    def rounding(self):
        """How this pair's numbers are served (market/precision.py)."""
        from .precision import Rounding

        cached = self.__dict__.get("_rounding")
        if cached is None:
            cached = self.__dict__["_rounding"] = Rounding(self.price_increment, self.amount_increment)
        return cached


class PairCheckpoint(models.Model):
    """The state of one pair's pure core (pickled) as it stood at `cursor_ms`, every event
    before it fed. Subclasses declare `pair` with their own related name."""

    cursor_ms = models.BigIntegerField()
    state = models.BinaryField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.pair} @ {self.cursor_ms}"


class BarFields(models.Model):
    """The mergeable aggregates of market.bars.Bar, per pair and bar start (epoch ms).

    The primary key is (pair, ts_ms): one index serves the upsert, every read (a pair's
    bars in time order) and the uniqueness; there is no id column. In PostgreSQL each bar
    table is partitioned by ts_ms (`partition_span`, market/partitions.py) and its columns
    are laid out widest first, so no byte goes to alignment padding (migration 0004)."""

    pk = models.CompositePrimaryKey("pair", "ts_ms")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="+", db_index=False)
    ts_ms = models.BigIntegerField()
    trade_count = models.IntegerField(default=0)
    open = models.FloatField(null=True)
    high = models.FloatField(null=True)
    low = models.FloatField(null=True)
    close = models.FloatField(null=True)
    volume = models.FloatField(default=0)
    buy_volume = models.FloatField(default=0)
    sell_volume = models.FloatField(default=0)
    notional = models.FloatField(default=0)
    price_mean = models.FloatField(default=0)
    price_m2 = models.FloatField(default=0)
    book_samples = models.IntegerField(default=0)
    bid_amount_sum = models.FloatField(default=0)
    ask_amount_sum = models.FloatField(default=0)
    bid_notional_sum = models.FloatField(default=0)
    ask_notional_sum = models.FloatField(default=0)
    bid_orders_sum = models.BigIntegerField(default=0)
    ask_orders_sum = models.BigIntegerField(default=0)
    quote_count = models.IntegerField(default=0)
    bid_price = models.FloatField(null=True)
    ask_price = models.FloatField(null=True)
    spread_bps_sum = models.FloatField(default=0)
    spread_bps_min = models.FloatField(null=True)
    spread_bps_max = models.FloatField(null=True)

    partition_key = "ts_ms"

    class Meta:
        abstract = True


class SecondBar(BarFields):
    partition_span = "day"  # retention drops a day at a time


class MinuteBar(BarFields):
    partition_span = "day"


class HourBar(BarFields):
    partition_span = "month"  # kept forever: a month of hours is the common chart, one or two partitions


class DayBar(BarFields):
    partition_span = "year"


BAR_MODELS = {"second": SecondBar, "minute": MinuteBar, "hour": HourBar, "day": DayBar}


class SecondBarPack(models.Model):
    """One minute of a pair's second bars, packed (market/bar_pack.py): the packed tier of
    the second-bar store. SecondBar keeps the seconds of minutes not packed yet (the open
    one); a closed minute's seconds move here in the transaction that writes past its end
    (market/services.py), so a second is in exactly one of the two. A row costs ~60 B of
    header, line pointer and index entry whatever its size: one per minute instead of one
    per second (docs/DECISIONS.md). Partitioned by day of minute_ts_ms like SecondBar."""

    pk = models.CompositePrimaryKey("pair", "minute_ts_ms")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="+", db_index=False)
    minute_ts_ms = models.BigIntegerField()
    seconds = models.BigIntegerField(help_text="Bit i set: the bar at minute_ts_ms + i s is in the pack")
    data = models.BinaryField(help_text="market.bar_pack: format byte, then zstd of null masks and values")

    partition_key = "minute_ts_ms"
    partition_span = "day"  # dropped with the day's second bars

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(Exact(Mod("minute_ts_ms", 60_000), 0), minute_ts_ms__gte=0),
                                   name="secondbarpack_minute_whole"),
            models.CheckConstraint(condition=Q(seconds__gt=0) & Q(seconds__lt=1 << 60),
                                   name="secondbarpack_seconds_valid"),
        ]

    def __str__(self) -> str:
        return f"pair {self.pair_id} @ {self.minute_ts_ms}: {self.seconds.bit_count()} s"
