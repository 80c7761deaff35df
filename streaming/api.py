"""The streaming control plane: /api/v1/streams*."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from billing.selectors import streaming_refusal
from config import clock
from config.api import params
from config.api.errors import InvalidParameter, NotFound
from config.api.media import CONTENT_TYPES, TOON
from market.api import StreamablePairView
from market.models import BAR_MODELS, Pair
from market.selectors import bars_page, pair_get, pair_streamable, pairs_streamable, second_bars_count

from . import selectors, services, snapshot
from .models import METRICS
from .sse_auth import not_subscribed, token_issue

GRANULARITIES = ("second", "minute", "hour", "day")
HOUR_MS = 3_600_000
SNAPSHOT_CAP_MS = {"second": 24 * HOUR_MS, "minute": 7 * 24 * HOUR_MS, "hour": 30 * 24 * HOUR_MS,
                   "day": 366 * 24 * HOUR_MS}
SNAPSHOT_LOOKBACK_MS = {"second": HOUR_MS, "minute": 24 * HOUR_MS, "hour": 7 * 24 * HOUR_MS,
                        "day": 30 * 24 * HOUR_MS}
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _human(ms: int) -> str:
    hours = ms // HOUR_MS
    return f"{hours // 24} days" if hours >= 48 else f"{hours} hours"


class StreamingView(StreamablePairView):
    """A view of one pair's stream (or of the streams): the subscriber's metrics."""

    def subscribed_metrics(self, request, pair: Pair) -> list[str]:
        """The metrics the account streams of the pair; 402 when it streams none: a stream's
        data is served to its subscribers only, as the SSE connect refuses."""
        subscription = selectors.subscription_get(account=request.user.account, pair=pair)
        if subscription is None:
            raise not_subscribed(pair)
        return subscription.metrics


SUBSCRIPTION = inline_serializer("Subscription", {
    "exchange": serializers.CharField(), "base": serializers.CharField(), "quote": serializers.CharField(),
    "metrics": serializers.ListField(child=serializers.ChoiceField(METRICS)),
    "state": serializers.ChoiceField(["REQUESTED", "WARMING", "READY", "STALE", "FAILED"])})


class SubscribeRequest(params.RequestSerializer):
    exchange = params.Text(max_length=40, help_text="Exchange id, e.g. binance")
    base = params.Text(max_length=20, help_text="Base asset symbol, e.g. BTC")
    quote = params.Text(max_length=20, help_text="Quote asset symbol, e.g. USDT")
    metrics = params.ChoiceList(METRICS, default=list(METRICS), help_text="Metrics to add (default: all)")
    format = params.Format()


class StreamsView(StreamingView):
    inputs = {"POST": SubscribeRequest}

    @extend_schema(summary="Every pair available for streaming", tags=["streams"], responses=inline_serializer(
        "PairList", {"pairs": serializers.ListField(child=inline_serializer("PairItem", {
            "exchange": serializers.CharField(), "base": serializers.CharField(), "quote": serializers.CharField(),
            "symbol": serializers.CharField(), "source": serializers.CharField(),
            "simulated": serializers.BooleanField(), "subscribed": serializers.BooleanField(),
            "metrics": serializers.ListField(child=serializers.CharField())}))}))
    def get(self, request):
        mine = selectors.subscriptions_of(account=request.user.account)
        return Response({"pairs": [{
            "exchange": pair.exchange.slug, "base": pair.base.symbol, "quote": pair.quote.symbol,
            "symbol": pair.symbol, "source": pair.exchange.source, "simulated": pair.exchange.simulated,
            "subscribed": pair.pk in mine, "metrics": mine[pair.pk].metrics if pair.pk in mine else [],
        } for pair in pairs_streamable()]})

    @extend_schema(summary="Subscribe to a pair (idempotent, additive)", tags=["streams"], description=(
        "Billed per pair: a pair you do not stream yet is added to this month's bill, pro rata per day. "
        "Posting a pair you stream already, with metrics it has, changes nothing and costs nothing; the "
        "examples are pairs the demo account streams."), examples=[
        OpenApiExample("BTC/USDT on Binance, every metric", request_only=True,
                       value={"exchange": "binance", "base": "BTC", "quote": "USDT"}),
        OpenApiExample("Trades and quotes only", request_only=True,
                       value={"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["trade", "quote"]})],
                   responses={200: SUBSCRIPTION, 201: SUBSCRIPTION})
    def post(self, request):
        given = self.read_input(request)
        exchange, base, quote, metrics = given["exchange"], given["base"], given["quote"], given["metrics"]
        pair = pair_streamable(exchange=exchange, base=base, quote=quote)
        if pair is None:
            raise InvalidParameter("pair", f"{exchange}/{base}/{quote} is not available for streaming; "
                                           "GET /api/v1/streams lists the pairs that are")
        subscription, created = services.subscription_upsert(account=request.user.account, pair=pair,
                                                             metrics=metrics)
        status = selectors.pair_status(pair=pair, account=request.user.account,
                                       subscribed=subscription.metrics, recent=True)
        return Response({"exchange": pair.exchange.slug, "base": pair.base.symbol, "quote": pair.quote.symbol,
                         "metrics": subscription.metrics, "state": status["state"]},
                        status=201 if created else 200)


class UnsubscribeQuery(params.RequestSerializer):
    metric = params.Choice(METRICS, required=False, help_text="Remove only this metric (default: the whole pair)")
    format = params.Format()


# What follows the pair in a stream path: `.../BTC-USDT/status` reaches StreamPairView with
# BTC-USDT for a base and `status` for a quote.
PAIR_ACTIONS = ("status", "snapshot", "live", "token", "events", "schemes")


class StreamPairView(StreamingView):
    inputs = {"DELETE": UnsubscribeQuery}

    def initial(self, request, *args, **kwargs):
        """A pair written the series' way (binance/BTC-USDT/status) is no path of ours,
        whatever the method, and the answer says how to write it: before the key is read,
        as for any unknown path (a DELETE would otherwise unsubscribe nothing, 204)."""
        base, quote = kwargs["base"], kwargs["quote"]
        if quote.lower() in PAIR_ACTIONS and base.count("-") == 1:
            exchange, (symbol_base, symbol_quote) = kwargs["exchange"], base.split("-")
            path = f"/api/v1/streams/{exchange}/{symbol_base}/{symbol_quote}/{quote}"
            raise NotFound(f"Stream paths name the pair as {{exchange}}/{{base}}/{{quote}}, not {base}: use {path}",
                           details={"pair": f"{exchange}/{base}", "use": path})
        super().initial(request, *args, **kwargs)

    @extend_schema(summary="Unsubscribe the pair, or one metric of it", tags=["streams"], responses={204: None})
    def delete(self, request, exchange, base, quote):
        metric = self.read_input(request).get("metric")
        # any pair, streamable or not: a pair withdrawn from streaming can still be left
        pair = pair_get(exchange=exchange, base=base, quote=quote)
        if pair is not None:
            services.subscription_remove(account=request.user.account, pair=pair, metric=metric)
        return Response(status=204)


class StatusView(StreamingView):
    subscribers_only = True  # 402 for a pair the account does not subscribe (the schema says so)
    counted_when_served = True  # reads only
    @extend_schema(summary="Derived state of a pair's stream with its raw signals", tags=["streams"],
                   responses=inline_serializer("StreamStatus", {
                       "exchange": serializers.CharField(), "base": serializers.CharField(),
                       "quote": serializers.CharField(), "subscribed": serializers.BooleanField(),
                       "state": serializers.CharField(), "signals": serializers.DictField(),
                       "metrics": serializers.DictField()}))
    def get(self, request, exchange, base, quote):
        pair = self.pair_or_404(exchange, base, quote)
        metrics = self.subscribed_metrics(request, pair)
        return Response(selectors.pair_status(pair=pair, account=request.user.account, subscribed=metrics,
                                              recent=True))


def _bar_row_fetcher(pair_id: int, granularity: str, to_ms: int, metrics: list[str], supply, rounding):
    """Pages of rows by keyset (ts_ms > last), each page its own short query, so the
    response can be streamed without a server-side cursor held across threads."""
    columns, make = snapshot.stored_columns(metrics), snapshot.page_maker(metrics, supply, rounding)

    def fetch(after_ms: int) -> list[dict]:
        return make(bars_page(pair_id=pair_id, granularity=granularity, columns=columns,
                              after_ms=after_ms, to_ms=to_ms, limit=settings.SNAPSHOT_PAGE_ROWS))

    return fetch


async def _stream(pieces, fetch, from_ms: int):
    """The body of a large snapshot: pages fetched one at a time in a worker thread."""
    after = from_ms - 1
    yield pieces.opening
    while True:
        page = await sync_to_async(fetch)(after)
        if not page:
            break
        yield pieces.page(page)
        after = page[-1]["ts_ms"]
    if pieces.closing:
        yield pieces.closing


class SnapshotRequest(params.RequestSerializer):
    metrics = params.ChoiceList(METRICS, help_text="trade, book and/or quote")
    granularity = params.Choice(GRANULARITIES, help_text="second, minute, hour or day (day: trade only)")
    to_ms = params.Integer(min_value=0, max_value=MAX_MS, required=False,
                           help_text="Epoch ms, exclusive; default now. to_ms - from_ms is at most 24 h for "
                                     "second bars, 7 d minute, 30 d hour, 366 d day")
    from_ms = params.Integer(min_value=0, max_value=MAX_MS, required=False,
                             help_text="Epoch ms, inclusive; default to_ms minus the granularity's lookback "
                                       "(second 1 h, minute 24 h, hour 7 d, day 30 d)")
    format = params.Format()
    # to_ms is read first: from_ms defaults from it

    def validate(self, attrs):
        granularity = attrs["granularity"]
        if granularity == "day" and set(attrs["metrics"]) - {"trade"}:
            raise InvalidParameter("granularity", "day is available for the trade metric only")
        to_ms = attrs.setdefault("to_ms", clock.now_ms())
        from_ms = attrs.setdefault("from_ms", max(to_ms - SNAPSHOT_LOOKBACK_MS[granularity], 0))
        if from_ms > to_ms:
            raise InvalidParameter("from_ms", f"must not be after to_ms ({to_ms})")
        cap = SNAPSHOT_CAP_MS[granularity]
        if to_ms - from_ms > cap:
            raise InvalidParameter("to_ms", f"{granularity} snapshots cover at most {_human(cap)} "
                                            f"(to_ms - from_ms <= {cap})", cap_ms=cap, granularity=granularity)
        return attrs


class SnapshotView(StreamingView):
    subscribers_only = True  # 402 for a pair the account does not subscribe (the schema says so)
    inputs = {"POST": SnapshotRequest}

    @extend_schema(summary="Historical bars of a pair", tags=["streams"], examples=[
        OpenApiExample("The last 24 hours of minute trade bars", request_only=True,
                       value={"metrics": ["trade"], "granularity": "minute"}),
        OpenApiExample("An hour of second bars, every metric, as TOON", request_only=True,
                       value={"metrics": ["trade", "book", "quote"], "granularity": "second", "format": "toon"})],
        responses=inline_serializer("Snapshot", {
            "exchange": serializers.CharField(), "base": serializers.CharField(), "quote": serializers.CharField(),
            "granularity": serializers.CharField(), "from_ms": serializers.IntegerField(),
            "to_ms": serializers.IntegerField(), "metrics": serializers.ListField(child=serializers.CharField()),
            "count": serializers.IntegerField(), "bars": serializers.ListField(child=serializers.DictField())}))
    def post(self, request, exchange, base, quote):
        pair = self.pair_or_404(exchange, base, quote)
        given = self.read_input(request)
        self.subscribed_metrics(request, pair)
        metrics, granularity, from_ms, to_ms = given["metrics"], given["granularity"], given["from_ms"], given["to_ms"]
        upper = selectors.snapshot_upper_bound(pair=pair, to_ms=to_ms)
        count = (second_bars_count(pair_id=pair.pk, from_ms=from_ms, to_ms=upper) if granularity == "second" else
                 BAR_MODELS[granularity].objects.filter(pair=pair, ts_ms__gte=from_ms, ts_ms__lt=upper).count())
        head = {"exchange": pair.exchange.slug, "base": pair.base.symbol, "quote": pair.quote.symbol,
                "granularity": granularity, "from_ms": from_ms, "to_ms": to_ms, "metrics": metrics,
                "count": count}
        fetch = _bar_row_fetcher(pair.pk, granularity, upper, metrics, pair.base.circulating_supply, pair.rounding)
        if count <= settings.SNAPSHOT_STREAM_ROWS:
            rows, after = [], from_ms - 1
            while page := fetch(after):
                rows.extend(page)
                after = page[-1]["ts_ms"]
            return Response({**head, "bars": rows[:count]})
        return self._streamed(request, head, count, metrics, fetch, from_ms)

    def _streamed(self, request, head, count, metrics, fetch, from_ms):
        """A large snapshot leaves in pieces straight from database pages; its metering
        headers carry the counts before it, and its bytes are counted when it ends."""
        fmt = request.accepted_renderer.format
        if fmt == TOON:
            pieces = snapshot.ToonPieces(head, count, snapshot.columns(metrics))
        else:
            pieces = snapshot.JsonPieces(head)
        return StreamingHttpResponse(_stream(pieces, fetch, from_ms), content_type=CONTENT_TYPES[fmt])


# The body is the bar or JSON null; a raw schema, as a serializer cannot be null at the top.
LIVE_BAR = {"type": "object", "nullable": True, "required": ["ts_ms"], "properties": {
    "ts_ms": {"type": "integer", "format": "int64"},
    **{field: {"type": "number", "nullable": True, "description": f"{metric} metric"}
       for metric, fields in snapshot.FIELDS.items() for field in fields}}}


class LiveView(StreamingView):
    subscribers_only = True  # 402 for a pair the account does not subscribe (the schema says so)
    counted_when_served = True  # reads only; polled every second
    @extend_schema(summary="The latest live 1-second bar, or null", tags=["streams"],
                   responses={200: LIVE_BAR})
    def get(self, request, exchange, base, quote):
        pair = self.pair_or_404(exchange, base, quote)
        metrics = self.subscribed_metrics(request, pair)
        bar = selectors.live_bar(pair=pair)
        if bar is None:
            return Response(None)
        return Response(snapshot.row(bar, metrics, pair.base.circulating_supply, pair.rounding))


class StreamTokenView(StreamingView):
    subscribers_only = True  # 402 for a pair the account does not subscribe (the schema says so)
    @extend_schema(
        summary="A short-lived token for EventSource (which cannot send headers)", tags=["streams"],
        request=None,
        responses=inline_serializer("StreamToken", {
            "token": serializers.CharField(), "expires_in_seconds": serializers.IntegerField(),
            "events_url": serializers.CharField()}))
    def post(self, request, exchange, base, quote):
        # refused as the stream it opens would be, in the SSE connect's order
        pair = self.pair_or_404(exchange, base, quote)
        refusal = streaming_refusal(request.user.account)
        if refusal is not None:
            raise refusal
        self.subscribed_metrics(request, pair)
        token = token_issue(account_id=request.user.account_id, pair_id=pair.pk, key_id=request.user.key_id)
        return Response({"token": token, "expires_in_seconds": settings.SSE_TOKEN_SECONDS,
                         "events_url": f"/api/v1/streams/{pair.path}/events?token={token}"})

