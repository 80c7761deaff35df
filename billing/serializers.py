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


class UsageSerializer(serializers.Serializer):
    period = PeriodSerializer()
    plan = serializers.CharField()
    requests = CounterSerializer()
    bytes = CounterSerializer()
    streams = StreamsUsageSerializer()
