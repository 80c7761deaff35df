"""The service's routes plus endpoints that only tests and benchmarks use."""

import os

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.views import AccountAPIView
from config.api import params
from config.urls import handler404, handler500, urlpatterns as root_urlpatterns  # noqa: F401


def _rows(request):
    count = min(int(request.query_params.get("rows", 31)), 5000)
    return {"meta": {"symbol": "BTC-USDT", "count": count},
            "data": [{"date": f"2024-01-{1 + i % 28:02d}", "open": 42000.5 + i, "high": 42100.25 + i,
                      "low": 41900.75 + i, "close": 42050.0 + i, "observation_count": 86400,
                      "price_sum": 3.6e9 + i, "price_variance": 12.5} for i in range(count)]}


class RowsQuery(params.RequestSerializer):
    rows = params.Integer(min_value=0, max_value=5000, required=False)


class CountedRows(AccountAPIView):
    inputs = {"GET": RowsQuery}
    schema = None  # a benchmark's route, not part of the documented API

    def get(self, request):
        return Response(_rows(request))


class CountedRowsWhenServed(CountedRows):
    """The same, counted with its body in one statement as the answer leaves."""

    counted_when_served = True


class UnmeteredRows(APIView):
    """The same work with authentication and the plan check but no metering at all."""

    schema = None

    def get(self, request):
        return Response(_rows(request))


def bare(request):
    """The floor: a plain Django JSON view, no DRF, no key, no database."""
    return JsonResponse({"status": "ok", "data": [1, 2, 3]})


def bare_database(request):
    """The floor of a path that must ask the database: the bare view plus one round trip
    (`SELECT 1`) on the pooled connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return JsonResponse({"status": "ok", "data": [1, 2, 3]})


def process(request):
    """Which server process answered (tests of several processes on one port)."""
    return JsonResponse({"pid": os.getpid()})


urlpatterns = [
    path("api/v1/test/bare", bare),
    path("api/v1/test/bare-database", bare_database),
    path("api/v1/test/process", process),
    path("api/v1/test/rows", CountedRows.as_view()),
    path("api/v1/test/rows-when-served", CountedRowsWhenServed.as_view()),
    path("api/v1/test/rows-unmetered", UnmeteredRows.as_view()),
    *root_urlpatterns,
]
