"""Every response, data or error, is served as JSON or TOON by the same rules."""

import pytest
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import urlpatterns as root_urlpatterns

CANDLES = {
    "meta": {"source_type": "exchange", "source": "binance", "symbol": "BTC-USDT",
             "metric_type": "candlestick", "sides": ["ohlc"], "resolution": "daily",
             "start": "2024-01-01", "end": "2024-01-02", "count": 2},
    "data": [
        {"date": "2024-01-01", "open": 42283.58, "high": 44184.1, "low": 42180.77, "close": 44179.55,
         "observation_count": 86400, "price_sum": 3739251234.5, "price_variance": 312.25},
        {"date": "2024-01-02", "open": 44179.55, "high": 45879.63, "low": 44148.34, "close": 44946.91,
         "observation_count": 86399, "price_sum": 3881239123.25, "price_variance": 0.0},
    ],
}


class Series(APIView):
    def get(self, request):
        return Response(CANDLES)

    def post(self, request):
        return Response({**CANDLES, "echo": request.data.get("symbol")})


urlpatterns = [path("api/v1/test/series", Series.as_view()), *root_urlpatterns]
handler404 = "config.api.views.handler404"
pytestmark = pytest.mark.urls(__name__)


def decode_toon(text: str):
    import toon_format

    return toon_format.decode(text)


def test_default_is_json(api):
    response = api.get("/api/v1/test/series")
    assert response["Content-Type"] == "application/json"
    assert response.json() == CANDLES


def test_accept_toon_serves_toon_that_decodes_to_the_json_body(api):
    response = api.get("/api/v1/test/series", HTTP_ACCEPT="application/toon")
    assert response["Content-Type"] == "application/toon; charset=utf-8"
    text = response.content.decode()
    assert "sides[1]: ohlc" in text
    assert "data[2]{date,open,high,low,close,observation_count,price_sum,price_variance}:" in text
    assert decode_toon(text) == api.get("/api/v1/test/series").json()


def test_text_toon_is_accepted_as_toon(api):
    response = api.get("/api/v1/test/series", HTTP_ACCEPT="text/toon")
    assert response["Content-Type"].startswith("application/toon")


def test_body_format_toon(api):
    response = api.post("/api/v1/test/series", {"symbol": "BTC-USDT", "format": "toon"}, format="json")
    assert response["Content-Type"].startswith("application/toon")
    assert decode_toon(response.content.decode())["echo"] == "BTC-USDT"


def test_query_format_toon(api):
    response = api.get("/api/v1/test/series?format=toon")
    assert response["Content-Type"].startswith("application/toon")


def test_body_format_beats_query_format(api):
    response = api.post("/api/v1/test/series?format=toon", {"format": "json"}, format="json")
    assert response["Content-Type"] == "application/json"


def test_accept_toon_beats_body_format_json(api):
    response = api.post("/api/v1/test/series", {"format": "json"}, format="json", HTTP_ACCEPT="application/toon")
    assert response["Content-Type"].startswith("application/toon")


@pytest.mark.parametrize("query", ["?format=xml", "?format=", "?format=TOON"])
def test_unknown_query_format_is_400_invalid_parameter(api, query):
    response = api.get("/api/v1/test/series" + query)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == "format"


def test_unknown_body_format_is_400_invalid_parameter(api):
    response = api.post("/api/v1/test/series", {"format": "csv"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"]["parameter"] == "format"


def test_unknown_format_error_is_served_in_toon_when_accept_asks(api):
    response = api.get("/api/v1/test/series?format=xml", HTTP_ACCEPT="application/toon")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/toon")
    assert decode_toon(response.content.decode())["error"]["code"] == "invalid_parameter"


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "image/png, text/csv"])
def test_accept_admitting_neither_type_is_415(api, accept):
    response = api.get("/api/v1/test/series", HTTP_ACCEPT=accept)
    assert response.status_code == 415
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_errors_are_negotiated_too(client, db):
    response = client.get("/api/v1/test/series", HTTP_ACCEPT="application/toon")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/toon")
    body = decode_toon(response.content.decode())
    assert body["error"]["code"] == "unauthorized"
    assert body["error"]["request_id"] == response["X-Request-Id"]


def test_not_found_outside_drf_is_negotiated(client, db):
    response = client.get("/api/v1/nothing?format=toon")
    assert response.status_code == 404
    assert decode_toon(response.content.decode())["error"]["code"] == "not_found"


@pytest.mark.parametrize("body", [b"[1,2]", b'"text"', b"{not json", b"42"])
def test_a_body_that_is_not_a_json_object_is_400_invalid_json(api, body):
    response = api.post("/api/v1/test/series", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_usage_round_trips_through_toon(api):
    as_json = api.get("/api/v1/me/usage").json()
    as_toon = api.get("/api/v1/me/usage", HTTP_ACCEPT="application/toon").content.decode()
    assert decode_toon(as_toon) == as_json
