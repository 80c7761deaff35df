"""Response shapes of the billing endpoints, for the OpenAPI document."""

from rest_framework import serializers


class PeriodSerializer(serializers.Serializer):
    start = serializers.CharField(help_text="ISO 8601 UTC, start of the month")
    end = serializers.CharField(help_text="ISO 8601 UTC, start of the next month (reset)")


class CounterSerializer(serializers.Serializer):
    used = serializers.IntegerField()
    limit = serializers.IntegerField()
    remaining = serializers.IntegerField()


class StreamsUsageSerializer(serializers.Serializer):
    pairs = serializers.IntegerField(help_text="Pairs the account subscribes to now")


class KeyEndpointUsageSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The key as shown on the keys page: mdp_live_ and its lookup id")
    key_name = serializers.CharField()
    key_revoked = serializers.BooleanField(help_text="The key was revoked since (its usage still counts)")
    endpoint = serializers.CharField(help_text="Method and route, e.g. POST /api/v1/market/candlestick "
                                               "or GET /api/v1/streams/{exchange}/{base}/{quote}/status")
    requests = serializers.IntegerField()
    bytes = serializers.IntegerField()
    last_request_at = serializers.CharField(help_text="ISO 8601 UTC, when the last counted request "
                                                      "of this key on this endpoint was served")


class UsageSerializer(serializers.Serializer):
    period = PeriodSerializer()
    plan = serializers.CharField()
    requests = CounterSerializer()
    bytes = CounterSerializer()
    streams = StreamsUsageSerializer()
    by_key_and_endpoint = KeyEndpointUsageSerializer(
        many=True, help_text="This month's counted requests and bytes per key and endpoint; they add up "
                             "to the month's figures once requests in flight are done")
