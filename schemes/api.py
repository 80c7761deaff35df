from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from config.api import params
from config.clock import now_ms
from market.api import StreamablePairView

from .selectors import scheme_history

SCHEME_EVENT = inline_serializer("SchemeEvent", {
    "id": serializers.IntegerField(), "ts_ms": serializers.IntegerField(),
    "scheme": serializers.ChoiceField(["flipping", "vacuuming", "layering"]),
    "direction": serializers.ChoiceField(["up", "down"]), "side": serializers.ChoiceField(["bid", "ask"]),
    "price": serializers.FloatField(allow_null=True), "confidence": serializers.FloatField(),
    "alert_score": serializers.FloatField(), "build": serializers.DictField(), "collapse": serializers.DictField()})


class SchemesQuery(params.RequestSerializer):
    lookback_hours = params.Integer(min_value=1, max_value=720, default=24,
                                    help_text="Hours back from now, 1..720 (default 24)")
    limit = params.Integer(min_value=100, max_value=50_000, default=10_000,
                           help_text="At most this many events, newest first, 100..50000 (default 10000)")
    format = params.Format()


class SchemesView(StreamablePairView):
    counted_when_served = True  # reads only; the limit bounds the body
    inputs = {"GET": SchemesQuery}

    @extend_schema(
        summary="Scheme events detected live on the pair (flipping, vacuuming, layering)", tags=["streams"],
        responses=inline_serializer("SchemeHistory", {
            "start_ms": serializers.IntegerField(), "end_ms": serializers.IntegerField(),
            "events": serializers.ListField(child=SCHEME_EVENT)}))
    def get(self, request, exchange, base, quote):
        given = self.read_input(request)
        lookback, limit = given["lookback_hours"], given["limit"]
        pair = self.pair_or_404(exchange, base, quote)
        end = now_ms()
        start = end - lookback * 3_600_000
        return Response({"start_ms": start, "end_ms": end,
                         "events": scheme_history(pair=pair, start_ms=start, end_ms=end, limit=limit)})
