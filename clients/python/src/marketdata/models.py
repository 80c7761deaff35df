"""The typed results. Records are frozen dataclasses; table rows (series rows, snapshot
bars) stay dicts, typed as TypedDicts, because their columns depend on the request (a
`side`, the snapshot's `metrics`) and an absent column must stay absent rather than
become None.

TOON writes a whole float as an integer (`1.0` travels as `1`), so every numeric field
the API documents as a float is converted to float here: the same request gives equal
objects of equal types in JSON and in TOON."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, Iterator, Mapping, TypedDict, TypeVar

if TYPE_CHECKING:
    import pandas
    import polars

# Columns and fields the API documents as floats (docs/MARKET_DATA.md, docs/API.md).
FLOAT_FIELDS = frozenset({
    "open", "high", "low", "close", "price_sum", "price_variance",
    "volume", "buy_volume", "sell_volume", "vwap",
    "bid_amount", "ask_amount", "bid_notional", "ask_notional", "bid_orders", "ask_orders",
    "bid_price", "ask_price", "mid_price", "spread_bps", "spread_bps_avg", "spread_bps_min", "spread_bps_max",
    "bid_depth", "ask_depth", "imbalance", "circulating_supply",
})
INTEGER_FIELDS = frozenset({"observation_count", "trade_count", "ts_ms"})

# The columns of each series, for a typed empty frame when a range has no rows.
SERIES_COLUMNS: dict[str, tuple[str, ...]] = {
    "candlestick": ("date", "open", "high", "low", "close", "observation_count", "price_sum", "price_variance"),
    "limit_orders": ("date", "bid_amount", "ask_amount", "bid_notional", "ask_notional", "bid_orders", "ask_orders"),
    "trades": ("date", "volume", "buy_volume", "sell_volume", "trade_count", "vwap"),
    "spread": ("date", "bid_price", "ask_price", "mid_price", "spread_bps", "spread_bps_avg", "spread_bps_min",
               "spread_bps_max"),
}
BAR_COLUMNS: dict[str, tuple[str, ...]] = {
    "trade": ("open", "high", "low", "close", "volume", "buy_volume", "sell_volume", "trade_count", "vwap"),
    "book": ("bid_depth", "ask_depth", "imbalance", "circulating_supply"),
    "quote": ("bid_price", "ask_price", "mid_price", "spread_bps"),
}


def as_float(value: Any) -> float | None:
    return None if value is None else float(value)


def typed_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with its documented float columns as floats (TOON's `2` for JSON's `2.0`)."""
    return {name: (float(value) if name in FLOAT_FIELDS and value is not None and not isinstance(value, bool)
                   else value) for name, value in row.items()}


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `data` that `cls` declares: a field the server adds later is ignored."""
    names = cls.__dataclass_fields__.keys()
    return {name: data[name] for name in names if name in data}


# -- quota ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quota:
    """The account's monthly budget after this response, from the `X-Quota-*` headers."""

    requests_limit: int
    requests_used: int
    requests_remaining: int
    bytes_limit: int
    bytes_used: int
    bytes_remaining: int
    resets_at: datetime  # the start of the next UTC month

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Quota | None:
        try:
            return cls(
                requests_limit=int(headers["x-quota-requests-limit"]),
                requests_used=int(headers["x-quota-requests-used"]),
                requests_remaining=int(headers["x-quota-requests-remaining"]),
                bytes_limit=int(headers["x-quota-bytes-limit"]),
                bytes_used=int(headers["x-quota-bytes-used"]),
                bytes_remaining=int(headers["x-quota-bytes-remaining"]),
                resets_at=datetime.fromtimestamp(int(headers["x-quota-reset"]), timezone.utc))
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class Answer:
    """What every result carries besides its data."""

    quota: Quota | None = field(default=None, kw_only=True, compare=False, repr=False)
    request_id: str | None = field(default=None, kw_only=True, compare=False, repr=False)


# -- series ---------------------------------------------------------------------------------

class CandlestickRow(TypedDict):
    date: str  # YYYY-MM-DD (daily) or YYYY-MM-DDTHH:00:00Z (hourly), UTC
    open: float
    high: float
    low: float
    close: float
    observation_count: int
    price_sum: float
    price_variance: float


class LimitOrdersRow(TypedDict, total=False):
    date: str
    bid_amount: float
    ask_amount: float
    bid_notional: float
    ask_notional: float
    bid_orders: float
    ask_orders: float


class TradesRow(TypedDict):
    date: str
    volume: float
    buy_volume: float
    sell_volume: float
    trade_count: int
    vwap: float


class SpreadRow(TypedDict):
    date: str
    bid_price: float
    ask_price: float
    mid_price: float
    spread_bps: float
    spread_bps_avg: float
    spread_bps_min: float
    spread_bps_max: float


Row = TypeVar("Row", CandlestickRow, LimitOrdersRow, TradesRow, SpreadRow)


@dataclass(frozen=True)
class SeriesMeta:
    source_type: str
    source: str
    symbol: str
    metric_type: str
    sides: list[str]
    resolution: str
    start: str
    end: str
    count: int

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> SeriesMeta:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Series(Answer, Generic[Row]):
    """A historical series: `meta` and one row per period that has data."""

    meta: SeriesMeta
    rows: list[Row]

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> Series[Any]:
        return cls(meta=SeriesMeta.from_wire(data["meta"]), rows=[typed_row(r) for r in data["data"]], **answer)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def columns(self) -> tuple[str, ...]:
        return SERIES_COLUMNS.get(self.meta.metric_type, ("date",))

    def to_pandas(self) -> pandas.DataFrame:
        """One row per period; `date` as datetime64[ms, UTC] (needs the `pandas` extra)."""
        from .frames import rows_to_pandas

        return rows_to_pandas(self.rows, self.columns())

    def to_polars(self) -> polars.DataFrame:
        """One row per period; `date` as Datetime("ms", "UTC") (needs the `polars` extra)."""
        from .frames import rows_to_polars

        return rows_to_polars(self.rows, self.columns())


# -- streams: the catalog and subscriptions -----------------------------------------------------

@dataclass(frozen=True)
class StreamablePair:
    exchange: str
    base: str
    quote: str
    symbol: str
    subscribed: bool
    metrics: list[str]  # what this account subscribes to
    source: str | None = None
    simulated: bool | None = None

    @property
    def path(self) -> str:
        """`exchange/BASE/QUOTE`, the form every stream method takes."""
        return f"{self.exchange}/{self.base}/{self.quote}"


@dataclass(frozen=True)
class PairList(Answer):
    pairs: list[StreamablePair]

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> PairList:
        return cls(pairs=[StreamablePair(**_known(StreamablePair, p)) for p in data["pairs"]], **answer)

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[StreamablePair]:
        return iter(self.pairs)


@dataclass(frozen=True)
class Subscription(Answer):
    exchange: str
    base: str
    quote: str
    metrics: list[str]
    state: str
    created: bool = False  # True when this call subscribed the pair (201), False when it was already

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> Subscription:
        return cls(**_known(cls, data), **answer)


@dataclass(frozen=True)
class Unsubscribed(Answer):
    """An unsubscribe's answer (204, no body): only its quota and request id."""


@dataclass(frozen=True)
class StatusSignals:
    coverage_24h: float
    heartbeat_ms: int | None
    heartbeat_age_ms: int | None


@dataclass(frozen=True)
class MetricStatus:
    state: str
    coverage_24h: float
    heartbeat_ms: int | None = None
    subscribed: bool | None = None  # None in the feed's state-change events, which are the pair's, not the account's


@dataclass(frozen=True)
class StreamStatus(Answer):
    """REQUESTED, WARMING, READY, STALE or FAILED, with the signals it was derived from."""

    exchange: str
    base: str
    quote: str
    state: str
    signals: StatusSignals
    metrics: dict[str, MetricStatus]
    subscribed: bool | None = None  # None in the feed's state-change events, which are the pair's, not the account's

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> StreamStatus:
        signals = data["signals"]
        return cls(
            exchange=data["exchange"], base=data["base"], quote=data["quote"], subscribed=data.get("subscribed"),
            state=data["state"],
            signals=StatusSignals(coverage_24h=float(signals["coverage_24h"]), heartbeat_ms=signals.get("heartbeat_ms"),
                                  heartbeat_age_ms=signals.get("heartbeat_age_ms")),
            metrics={name: MetricStatus(subscribed=m.get("subscribed"), state=m["state"],
                                        coverage_24h=float(m["coverage_24h"]), heartbeat_ms=m.get("heartbeat_ms"))
                     for name, m in data["metrics"].items()},
            **answer)


# -- streams: data --------------------------------------------------------------------------

class Bar(TypedDict, total=False):
    """A second, minute, hour or day bar: `ts_ms` plus the fields of the requested metrics
    (trade, book, quote); a requested metric with no data in that bar has nulls."""

    ts_ms: int
    open: float | None
    high: float | None
    low: float | None
    close: float | None
    volume: float | None
    buy_volume: float | None
    sell_volume: float | None
    trade_count: int | None
    vwap: float | None
    bid_depth: float | None
    ask_depth: float | None
    imbalance: float | None
    circulating_supply: float | None
    bid_price: float | None
    ask_price: float | None
    mid_price: float | None
    spread_bps: float | None


def bar_columns(metrics: list[str]) -> tuple[str, ...]:
    return ("ts_ms", *(name for metric in ("trade", "book", "quote") if metric in metrics
                       for name in BAR_COLUMNS[metric]))


@dataclass(frozen=True)
class Snapshot(Answer):
    exchange: str
    base: str
    quote: str
    granularity: str
    from_ms: int
    to_ms: int
    metrics: list[str]
    count: int
    bars: list[Bar]

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> Snapshot:
        fields = _known(cls, data)
        fields["bars"] = [typed_row(bar) for bar in data["bars"]]
        return cls(**fields, **answer)

    def __len__(self) -> int:
        return len(self.bars)

    def __iter__(self) -> Iterator[Bar]:
        return iter(self.bars)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per bar; `ts_ms` becomes `ts`, datetime64[ms, UTC] (needs the `pandas` extra)."""
        from .frames import rows_to_pandas

        return rows_to_pandas(self.bars, bar_columns(self.metrics))

    def to_polars(self) -> polars.DataFrame:
        """One row per bar; `ts_ms` becomes `ts`, Datetime("ms", "UTC") (needs the `polars` extra)."""
        from .frames import rows_to_polars

        return rows_to_polars(self.bars, bar_columns(self.metrics))


@dataclass(frozen=True)
class LatestBar(Answer):
    """The latest published 1-second bar of a subscribed pair, or None before the first."""

    bar: Bar | None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any] | None, **answer: Any) -> LatestBar:
        return cls(bar=None if data is None else typed_row(data), **answer)


@dataclass(frozen=True)
class StreamToken(Answer):
    """A 5-minute token for a browser's EventSource, bound to the key and the pair."""

    token: str
    expires_in_seconds: int
    events_url: str  # path and query of the feed, token included

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> StreamToken:
        return cls(**_known(cls, data), **answer)


@dataclass(frozen=True)
class SchemeEvent:
    """A detected spoofing scheme; `build` and `collapse` hold the detector's metrics."""

    id: int
    ts_ms: int
    scheme: str  # flipping, vacuuming or layering
    direction: str
    side: str
    price: float | None
    confidence: float
    alert_score: float
    build: dict[str, Any]
    collapse: dict[str, Any]

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> SchemeEvent:
        fields = _known(cls, data)
        fields.update(price=as_float(data.get("price")), confidence=float(data["confidence"]),
                      alert_score=float(data["alert_score"]))
        return cls(**fields)


@dataclass(frozen=True)
class SchemeHistory(Answer):
    start_ms: int
    end_ms: int
    events: list[SchemeEvent]  # newest first

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> SchemeHistory:
        return cls(start_ms=data["start_ms"], end_ms=data["end_ms"],
                   events=[SchemeEvent.from_wire(e) for e in data["events"]], **answer)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[SchemeEvent]:
        return iter(self.events)


# -- rank and usage -----------------------------------------------------------------------------

@dataclass(frozen=True)
class RankedToken:
    rank: int
    symbol: str
    name: str
    market_cap_usd: float | None
    circulating_supply: float | None
    pairs: list[str]  # BASE-QUOTE symbols tradable on the exchange


@dataclass(frozen=True)
class Ranking(Answer):
    exchange: str
    as_of: str
    tokens: list[RankedToken]

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> Ranking:
        tokens = []
        for token in data["tokens"]:
            fields = _known(RankedToken, token)
            fields.update(market_cap_usd=as_float(token.get("market_cap_usd")),
                          circulating_supply=as_float(token.get("circulating_supply")))
            tokens.append(RankedToken(**fields))
        return cls(exchange=data["exchange"], as_of=data["as_of"], tokens=tokens, **answer)

    def __len__(self) -> int:
        return len(self.tokens)

    def __iter__(self) -> Iterator[RankedToken]:
        return iter(self.tokens)


@dataclass(frozen=True)
class UsageCounter:
    used: int
    limit: int
    remaining: int


@dataclass(frozen=True)
class UsageLine:
    """The requests and bytes of one key on one endpoint this month."""

    key: str
    key_name: str
    key_revoked: bool
    endpoint: str
    requests: int
    bytes: int
    last_request_at: str | None


@dataclass(frozen=True)
class Usage(Answer):
    period_start: str
    period_end: str
    plan: str
    requests: UsageCounter
    bytes: UsageCounter
    stream_pairs: int
    by_key_and_endpoint: list[UsageLine]

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], **answer: Any) -> Usage:
        return cls(period_start=data["period"]["start"], period_end=data["period"]["end"], plan=data["plan"],
                   requests=UsageCounter(**_known(UsageCounter, data["requests"])),
                   bytes=UsageCounter(**_known(UsageCounter, data["bytes"])),
                   stream_pairs=data.get("streams", {}).get("pairs", 0),
                   by_key_and_endpoint=[UsageLine(**_known(UsageLine, line))
                                        for line in data.get("by_key_and_endpoint", [])],
                   **answer)


# -- the live feed ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LiveEvent:
    """One event of the live feed. `data` is a `Bar` for `bar`, a `SchemeEvent` for
    `scheme-event`, a `StreamStatus` for `status`, and the server's dict for `stream-reset`
    (the position could not be resumed: fetch the gap with a snapshot). `id` is the feed
    position after this event (bars and scheme events only)."""

    event: str
    data: Any
    id: str | None = None
