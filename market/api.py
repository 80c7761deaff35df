"""Series endpoints (POST /api/v1/market/*) and pair discovery (GET /api/v1/rank/top)."""

from __future__ import annotations

from datetime import date, datetime, timezone

from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from billing.permissions import HasStreamingAccess
from config import clock, loop
from config.api import params
from config.api.errors import InvalidParameter, NotFound
from config.api.renderers import RENDER
from config.api.views import AccountAPIView
from config.recent import RecentLookups

from . import series
from .models import Pair
from .selectors import (exchange_get, pair_by_symbol, pair_streamable, ranked_assets_on,
                        series_rows, series_rows_on_loop)

RESOLUTIONS = {"daily": ("day", 3660), "hourly": ("hour", 92)}  # bar table, max days per request


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)


class SeriesRequest(params.RequestSerializer):
    exchange = params.Text(max_length=40, help_text="Exchange id, e.g. binance")
    symbol = params.Text(max_length=41, pattern=r"^[^-]+-[^-]+$", help_text="<BASE>-<QUOTE>, e.g. BTC-USDT",
                         pattern_reason="must look like BASE-QUOTE (e.g. BTC-USDT), not {value!r}")
    start = params.UtcDate(help_text="First UTC day, YYYY-MM-DD")
    end = params.UtcDate(help_text="Last UTC day, inclusive (a daily request covers at most 3,660 days, "
                                   "an hourly one 92)")
    resolution = params.Choice(RESOLUTIONS, default="daily", help_text="daily (default) or hourly")
    format = params.Format()

    def validate(self, attrs):
        start, end, resolution = attrs["start"], attrs.get("end"), attrs["resolution"]
        if end is None:
            end = attrs["end"] = max(start, clock.utcnow().date())
        if end < start:
            raise InvalidParameter("end", f"must not be before start ({start.isoformat()})")
        max_days = RESOLUTIONS[resolution][1]
        if (end - start).days + 1 > max_days:
            raise InvalidParameter("end", f"a {resolution} request covers at most {max_days} days",
                                   maximum_days=max_days)
        return attrs


class LimitOrdersRequest(SeriesRequest):
    end = params.UtcDate(required=False, help_text="Last UTC day, inclusive; default today (or start, if later)")
    side = params.Choice(sorted({name for sides in series.LIMIT_ORDER_SIDES.items() for name in (sides[0], *sides[1])}),
                         required=False, help_text="bid_amount or ask_amount (or bid / ask): only that side's columns")


def _series_examples(**extra) -> list[OpenApiExample]:
    return [OpenApiExample("BTC-USDT on Binance, October 2026, daily", request_only=True, value={
        "exchange": "binance", "symbol": "BTC-USDT", "start": "2026-10-01", "end": "2026-10-31", **extra}),
        OpenApiExample("ETH-USDT, one day by the hour, as TOON", request_only=True, value={
            "exchange": "binance", "symbol": "ETH-USDT", "start": "2026-10-15", "end": "2026-10-15",
            "resolution": "hourly", "format": "toon", **extra})]


def _meta_serializer(name: str):
    return inline_serializer(f"{name}Meta", {
        "source_type": serializers.CharField(), "source": serializers.CharField(),
        "symbol": serializers.CharField(), "metric_type": serializers.CharField(),
        "sides": serializers.ListField(child=serializers.CharField()),
        "resolution": serializers.CharField(), "start": serializers.CharField(),
        "end": serializers.CharField(), "count": serializers.IntegerField()})


def _series_response(name: str, row_fields: dict):
    return inline_serializer(f"{name}Series", {
        "meta": _meta_serializer(name),
        "data": serializers.ListField(child=inline_serializer(f"{name}Row", {
            "date": serializers.CharField(), **row_fields}))})


class SeriesView(AccountAPIView):
    metric: str = ""
    inputs = {"POST": SeriesRequest}
    counted_when_served = True  # reads only; the range cap bounds the body

    def post(self, request):
        given = self.read_input(request)
        pair = pair_by_symbol(exchange=given["exchange"], symbol=given["symbol"])
        if pair is None:
            exchange = given["exchange"]
            if exchange_get(slug=exchange) is None:
                raise InvalidParameter("exchange", f"unknown exchange {exchange!r}")
            raise InvalidParameter("symbol", f"{given['symbol'].upper()} is not listed on {exchange.lower()}")
        return Response(self.document(given, pair, series_rows(**self.rows_query(given, pair))))

    def rows_query(self, given: dict, pair) -> dict:
        """The arguments of `series_rows` for a validated request."""
        resolution = given["resolution"]
        return {"pair": pair, "metric": self.metric, "granularity": RESOLUTIONS[resolution][0],
                "resolution": resolution, "from_ms": _day_ms(given["start"]),
                "to_ms": _day_ms(given["end"]) + 86_400_000,  # not end + 1 day: 9999-12-31 has none
                "keep": self.columns(given.get("side"))[0]}

    def document(self, given: dict, pair, rows: list[dict]) -> dict:
        meta = {"source_type": "exchange", "source": pair.exchange.slug, "symbol": pair.symbol,
                "metric_type": self.metric, "sides": self.columns(given.get("side"))[1],
                "resolution": given["resolution"], "start": given["start"].isoformat(),
                "end": given["end"].isoformat(), "count": len(rows)}
        return {"meta": meta, "data": rows}

    def columns(self, side: str | None) -> tuple[tuple[str, ...] | None, list[str]]:
        return None, series.METRICS[self.metric]["sides"]


def _numbers(*names: str, required: bool = True) -> dict:
    # derived figures (variance, VWAP, averages) are null where they have no observations
    return {name: serializers.FloatField(required=required, allow_null=True) for name in names}


_CANDLE_FIELDS = _numbers("open", "high", "low", "close", "price_sum", "price_variance")


class CandlestickView(SeriesView):
    metric = "candlestick"

    @extend_schema(summary="Daily (or hourly) candlesticks of a pair", tags=["series"],
                   examples=_series_examples(),
                   responses=_series_response("Candlestick", {**_CANDLE_FIELDS,
                                                              "observation_count": serializers.IntegerField()}))
    def post(self, request):
        return super().post(request)


class LimitOrdersView(SeriesView):
    metric = "limit_orders"
    inputs = {"POST": LimitOrdersRequest}

    def columns(self, side):
        if side is None:
            return None, ["bid", "ask"]
        name = side.split("_")[0]
        return series.LIMIT_ORDER_SIDES[name], [name]

    @extend_schema(summary="Resting depth within 1 % of mid per period, both sides or one",
                   tags=["series"], examples=_series_examples(side="bid_amount"),
                   responses=_series_response("LimitOrders", _numbers(  # with `side`, one side's columns
                       "bid_amount", "ask_amount", "bid_notional", "ask_notional", "bid_orders", "ask_orders",
                       required=False)))
    def post(self, request):
        return super().post(request)


class TradesView(SeriesView):
    metric = "trades"

    @extend_schema(summary="Traded volume by taker side, trade count and VWAP", tags=["series"],
                   examples=_series_examples(),
                   responses=_series_response("Trades", {**_numbers("volume", "buy_volume", "sell_volume", "vwap"),
                                                         "trade_count": serializers.IntegerField()}))
    def post(self, request):
        return super().post(request)


class SpreadView(SeriesView):
    metric = "spread"

    @extend_schema(summary="Closing best bid/ask and the spread in basis points over the period",
                   tags=["series"], examples=_series_examples(),
                   responses=_series_response("Spread", _numbers(
                       "bid_price", "ask_price", "mid_price", "spread_bps", "spread_bps_avg",
                       "spread_bps_min", "spread_bps_max")))
    def post(self, request):
        return super().post(request)


# The rows of a closed range are shared for HISTORY_CACHE_SECONDS (market.selectors), and so
# is the body encoded from them: encoding 720 hourly rows cost as much as the rest of the
# loop's answer (docs/BENCHMARKS.md). A body is reused only with the very rows it was made
# of (the same list, not an equal one), so it is never older than they are. It holds those
# rows too: at most 32 MB of bodies and rows (~600 B a row) in all.
_ROW_BYTES = 600
_recent_bodies = RecentLookups("HISTORY_CACHE_SECONDS", max_entries=32 * 2**20,
                               size=lambda kept: len(kept[1]) + _ROW_BYTES * len(kept[0]))


def _encoded(fmt: str, document: dict) -> bytes:
    """RENDER[fmt](document), reusing the body of the same meta and the same rows."""
    key = (fmt, *(tuple(value) if isinstance(value, list) else value for value in document["meta"].values()))
    kept = _recent_bodies.fresh(key)
    if kept is not None and kept[0] is document["data"]:
        return kept[1]
    body = RENDER[fmt](document)
    _recent_bodies.put(key, (document["data"], body))
    return body


def series_on_loop(view_class: type[SeriesView]) -> loop.LoopRoute:
    """The view's answer to a plain request on the event loop (config/loop.py: the route
    reads the view's authentication, plan permission, input, formats and counting): a pair
    this process read lately, the view's rows (`series_rows_on_loop`: the same statement and
    rows, a closed range reused under the same rules) and the view's document. Counted with
    its body as it leaves, as the view's answers are."""
    view = view_class()

    async def body(call: loop.LoopCall) -> bytes | None:
        given = call.given
        pair = pair_by_symbol(exchange=given["exchange"], symbol=given["symbol"], held_only=True)
        if pair is None:
            return None
        rows = await series_rows_on_loop(**view.rows_query(given, pair))
        return _encoded(call.format, view.document(given, pair, rows))

    return loop.LoopRoute(view_class, body)


class RankTopQuery(params.RequestSerializer):
    exchange = params.Text(max_length=40, help_text="Exchange id, e.g. binance")
    n = params.Integer(min_value=1, max_value=250, default=10, help_text="How many tokens, 1..250 (default 10)")
    format = params.Format()


class RankTopView(AccountAPIView):
    permission_classes = [HasStreamingAccess]
    inputs = {"GET": RankTopQuery}
    counted_when_served = True

    @extend_schema(
        summary="Tokens by market-cap rank with a tradable pair on an exchange", tags=["streams"],
        responses=inline_serializer("RankTop", {
            "exchange": serializers.CharField(), "as_of": serializers.CharField(allow_null=True),
            "tokens": serializers.ListField(child=inline_serializer("RankedToken", {
                "rank": serializers.IntegerField(), "symbol": serializers.CharField(),
                "name": serializers.CharField(), "market_cap_usd": serializers.FloatField(allow_null=True),
                "circulating_supply": serializers.FloatField(allow_null=True),
                "pairs": serializers.ListField(child=serializers.CharField())}))}))
    def get(self, request):
        given = self.read_input(request)
        slug, n = given["exchange"], given["n"]
        exchange = exchange_get(slug=slug)
        if exchange is None:
            raise InvalidParameter("exchange", f"unknown exchange {slug!r}")
        ranked = ranked_assets_on(exchange=exchange, n=n)
        as_of = max((asset.ranked_at for asset, _ in ranked if asset.ranked_at), default=None)
        return Response({
            "exchange": exchange.slug,
            "as_of": as_of.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if as_of else None,
            "tokens": [{"rank": asset.market_cap_rank, "symbol": asset.symbol, "name": asset.name,
                        "market_cap_usd": asset.market_cap_usd, "circulating_supply": asset.circulating_supply,
                        "pairs": pairs} for asset, pairs in ranked],
        })


class StreamablePairView(AccountAPIView):
    """The base of the views of one pair under /streams/{exchange}/{base}/{quote}
    (`STREAM_PAIR` in market/urls.py): the streaming app's and the scheme history. The plan
    must include streaming; the pair must be one that can be streamed."""

    permission_classes = [HasStreamingAccess]

    def pair_or_404(self, exchange: str, base: str, quote: str) -> Pair:
        pair = pair_streamable(exchange=exchange, base=base, quote=quote)
        if pair is None:
            raise NotFound(f"No streamable pair {exchange}/{base}/{quote}.",
                           details={"pair": f"{exchange}/{base}/{quote}"})
        return pair
