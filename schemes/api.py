from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from config.api import params
from streaming.api import StreamingView
from config.clock import now_ms

from .selectors import scheme_history

SCHEME_EVENT = inline_serializer("SchemeEvent", {
    "id": serializers.IntegerField(), "ts_ms": serializers.IntegerField(),
    "scheme": serializers.ChoiceField(["flipping", "vacuuming", "layering"]),
    "direction": serializers.ChoiceField(["up", "down"]), "side": serializers.ChoiceField(["bid", "ask"]),
    "price": serializers.FloatField(allow_null=True), "confidence": serializers.FloatField(),
    "alert_score": serializers.FloatField(), "build": serializers.DictField(), "collapse": serializers.DictField()})


class SchemesView(StreamingView):
    query_fields = {"GET": ("lookback_hours", "limit")}

    @extend_schema(
        summary="Scheme events detected live on the pair (flipping, vacuuming, layering)", tags=["streams"],
        parameters=[OpenApiParameter("lookback_hours", int, description="1..720, default 24"),
                    OpenApiParameter("limit", int, description="100..50000, default 10000")],
        responses=inline_serializer("SchemeHistory", {
            "start_ms": serializers.IntegerField(), "end_ms": serializers.IntegerField(),
            "events": serializers.ListField(child=SCHEME_EVENT)}))
    def get(self, request, exchange, base, quote):
        lookback = params.integer(request.query_params, "lookback_hours", default=24, minimum=1, maximum=720)
        limit = params.integer(request.query_params, "limit", default=10_000, minimum=100, maximum=50_000)
        pair = self.pair_or_404(exchange, base, quote)
        end = now_ms()
        start = end - lookback * 3_600_000
        return Response({"start_ms": start, "end_ms": end,
                         "events": scheme_history(pair=pair, start_ms=start, end_ms=end, limit=limit)})
