"""Series endpoints (POST /api/v1/market/*) and pair discovery (GET /api/v1/rank/top)."""

from __future__ import annotations

from datetime import date, datetime, timezone

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from billing.base_views import AccountAPIView
from billing.permissions import HasStreamingAccess
from config import clock
from config.api import params
from config.api.errors import InvalidParameter

from . import series
from .selectors import bars_range, exchange_get, pair_by_symbol, ranked_assets_on

RESOLUTIONS = {"daily": ("day", 3660), "hourly": ("hour", 92)}  # bar table, max days per request


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1000)


class SeriesRequestSerializer(serializers.Serializer):
    exchange = serializers.CharField(help_text="Exchange id, e.g. binance")
    symbol = serializers.CharField(help_text="<BASE>-<QUOTE>, e.g. BTC-USDT")
    start = serializers.DateField(help_text="First UTC day, YYYY-MM-DD")
    end = serializers.DateField(help_text="Last UTC day, inclusive")
    resolution = serializers.ChoiceField(["daily", "hourly"], required=False, default="daily")
    format = serializers.ChoiceField(["json", "toon"], required=False)


class LimitOrdersRequestSerializer(SeriesRequestSerializer):
    end = serializers.DateField(required=False, help_text="Last UTC day, inclusive; default today")
    side = serializers.CharField(required=False, help_text="bid_amount or ask_amount (or bid / ask): "
                                                            "only that side's columns")


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
    body_fields = {"POST": ("exchange", "symbol", "start", "end", "resolution")}

    def post(self, request):
        data = request.data
        exchange = params.text(data, "exchange", max_length=40)
        symbol = params.text(data, "symbol", max_length=41)
        start = params.utc_date(data, "start")
        today = clock.utcnow().date()
        end = params.utc_date(data, "end", required=self.end_required(), default=self.default_end(start, today))
        resolution = params.choice(data, "resolution", RESOLUTIONS, default="daily")
        if end < start:
            raise InvalidParameter("end", f"must not be before start ({start.isoformat()})")
        granularity, max_days = RESOLUTIONS[resolution]
        if (end - start).days + 1 > max_days:
            raise InvalidParameter("end", f"a {resolution} request covers at most {max_days} days",
                                   maximum_days=max_days)
        if symbol.count("-") != 1:
            raise InvalidParameter("symbol", f"must look like BASE-QUOTE (e.g. BTC-USDT), not {symbol!r}")
        pair = pair_by_symbol(exchange=exchange, symbol=symbol)
        if pair is None:
            if exchange_get(slug=exchange) is None:
                raise InvalidParameter("exchange", f"unknown exchange {exchange!r}")
            raise InvalidParameter("symbol", f"{symbol.upper()} is not listed on {exchange.lower()}")
        keep, sides = self.columns(data)
        bars = bars_range(pair=pair, granularity=granularity, from_ms=_day_ms(start),
                          to_ms=_day_ms(end) + 86_400_000)  # not end + 1 day: 9999-12-31 has none
        rows = series.rows(bars, self.metric, resolution, keep=keep, rounding=pair.rounding)
        meta = {"source_type": "exchange", "source": pair.exchange.slug, "symbol": pair.symbol,
                "metric_type": self.metric, "sides": sides, "resolution": resolution,
                "start": start.isoformat(), "end": end.isoformat(), "count": len(rows)}
        return Response({"meta": meta, "data": rows})

    def end_required(self) -> bool:
        return True

    def default_end(self, start, today):
        return None

    def columns(self, data) -> tuple[tuple[str, ...] | None, list[str]]:
        return None, series.METRICS[self.metric]["sides"]


_CANDLE_FIELDS = {f: serializers.FloatField() for f in ("open", "high", "low", "close", "price_sum", "price_variance")}


class CandlestickView(SeriesView):
    metric = "candlestick"

    @extend_schema(summary="Daily (or hourly) candlesticks of a pair", tags=["series"],
                   request=SeriesRequestSerializer, examples=_series_examples(),
                   responses=_series_response("Candlestick", {**_CANDLE_FIELDS,
                                                              "observation_count": serializers.IntegerField()}))
    def post(self, request):
        return super().post(request)


class LimitOrdersView(SeriesView):
    metric = "limit_orders"
    body_fields = {"POST": (*SeriesView.body_fields["POST"], "side")}

    def end_required(self) -> bool:
        return False

    def default_end(self, start, today):
        return max(start, today) if start else today

    def columns(self, data):
        side = params.text(data, "side", required=False, max_length=20)
        if side is None:
            return None, ["bid", "ask"]
        name = side.lower().split("_")[0]
        if name not in series.LIMIT_ORDER_SIDES or side.lower() not in (name, *series.LIMIT_ORDER_SIDES[name]):
            raise InvalidParameter("side", f"must be bid_amount or ask_amount (or bid / ask), not {side!r}")
        return series.LIMIT_ORDER_SIDES[name], [name]

    @extend_schema(summary="Resting depth within 1 % of mid per period, both sides or one",
                   tags=["series"], request=LimitOrdersRequestSerializer, examples=_series_examples(side="bid_amount"),
                   responses=_series_response("LimitOrders", {f: serializers.FloatField() for f in (
                       "bid_amount", "ask_amount", "bid_notional", "ask_notional", "bid_orders", "ask_orders")}))
    def post(self, request):
        return super().post(request)


class TradesView(SeriesView):
    metric = "trades"

    @extend_schema(summary="Traded volume by taker side, trade count and VWAP", tags=["series"],
                   request=SeriesRequestSerializer, examples=_series_examples(),
                   responses=_series_response("Trades", {**{f: serializers.FloatField() for f in (
                       "volume", "buy_volume", "sell_volume", "vwap")}, "trade_count": serializers.IntegerField()}))
    def post(self, request):
        return super().post(request)


class SpreadView(SeriesView):
    metric = "spread"

    @extend_schema(summary="Closing best bid/ask and the spread in basis points over the period",
                   tags=["series"], request=SeriesRequestSerializer, examples=_series_examples(),
                   responses=_series_response("Spread", {f: serializers.FloatField() for f in (
                       "bid_price", "ask_price", "mid_price", "spread_bps", "spread_bps_avg",
                       "spread_bps_min", "spread_bps_max")}))
    def post(self, request):
        return super().post(request)


class RankTopView(AccountAPIView):
    permission_classes = [HasStreamingAccess]
    query_fields = {"GET": ("exchange", "n")}

    @extend_schema(
        summary="Tokens by market-cap rank with a tradable pair on an exchange", tags=["streams"],
        parameters=[OpenApiParameter("exchange", str, required=True),
                    OpenApiParameter("n", int, description="1..250, default 10")],
        responses=inline_serializer("RankTop", {
            "exchange": serializers.CharField(), "as_of": serializers.CharField(allow_null=True),
            "tokens": serializers.ListField(child=inline_serializer("RankedToken", {
                "rank": serializers.IntegerField(), "symbol": serializers.CharField(),
                "name": serializers.CharField(), "market_cap_usd": serializers.FloatField(allow_null=True),
                "circulating_supply": serializers.FloatField(allow_null=True),
                "pairs": serializers.ListField(child=serializers.CharField())}))}))
    def get(self, request):
        slug = params.text(request.query_params, "exchange", max_length=40)
        n = params.integer(request.query_params, "n", default=10, minimum=1, maximum=250)
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



