import pytest
from django.http import HttpResponse
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.permissions import HasStreamingAccess
from config.urls import urlpatterns as root_urlpatterns


class Boom(APIView):
    def get(self, request):
        raise RuntimeError("secret internal detail")


class StreamingOnly(APIView):
    permission_classes = [HasStreamingAccess]

    def get(self, request):
        return Response({"ok": True})


class ApiOnly(APIView):
    def get(self, request):
        return Response({"ok": True})


def plain_boom(request):
    raise RuntimeError("secret internal detail")


urlpatterns = [
    path("api/v1/test/boom", Boom.as_view()),
    path("api/v1/test/plain-boom", plain_boom),
    path("api/v1/test/streaming", StreamingOnly.as_view()),
    path("api/v1/test/api", ApiOnly.as_view()),
    path("api/v1/test/ok", lambda r: HttpResponse("ok")),
    *root_urlpatterns,
]
handler404 = "config.api.views.handler404"
handler500 = "config.api.views.handler500"

pytestmark = pytest.mark.urls(__name__)


def assert_envelope(response, status, code):
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    assert error["request_id"] == response["X-Request-Id"]
    return error


@pytest.mark.django_db
def test_missing_key_is_401_with_www_authenticate(client):
    response = client.get("/api/v1/test/api")
    assert_envelope(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["Bearer", "Basic abc", "Bearer mdp_live_short", "Token x", "Bearer " + "mdp_live_" + "A" * 50])
def test_malformed_or_unknown_key_is_401(client, header):
    response = client.get("/api/v1/test/api", HTTP_AUTHORIZATION=header)
    assert_envelope(response, 401, "unauthorized")
    assert "WWW-Authenticate" in response


def test_free_plan_gets_403_plan_forbidden(make_account, client_for):
    from accounts.services import api_key_create

    key = api_key_create(account=make_account(plan="free"), name="k")
    client = client_for(key.plaintext)
    assert_envelope(client.get("/api/v1/test/api"), 403, "plan_forbidden")
    assert_envelope(client.get("/api/v1/test/streaming"), 403, "plan_forbidden")


def test_plan_without_streaming_gets_403_on_streaming_routes_only(plans, make_account, client_for):
    from accounts.services import api_key_create
    from billing.services import plan_upsert

    plan_upsert(name="data-only", features=["api"], monthly_requests=10, monthly_bytes=10_000)
    account = make_account()
    account.plan = type(account.plan).objects.get(name="data-only")
    account.save()
    client = client_for(api_key_create(account=account, name="k").plaintext)
    assert client.get("/api/v1/test/api").status_code == 200
    assert_envelope(client.get("/api/v1/test/streaming"), 403, "plan_forbidden")


def test_plan_edit_takes_effect_on_the_next_request(api, account):
    assert api.get("/api/v1/test/streaming").status_code == 200
    account.plan.has_streaming = False
    account.plan.save()
    assert api.get("/api/v1/test/streaming").status_code == 403


def test_unknown_api_path_is_404_envelope(api):
    assert_envelope(api.get("/api/v1/test/nothing-here"), 404, "not_found")


@pytest.mark.django_db
def test_unknown_api_path_without_a_key_is_404_envelope(client):
    assert_envelope(client.get("/api/v1/no/such/route"), 404, "not_found")


def test_wrong_method_is_405_envelope(api):
    error = assert_envelope(api.delete("/api/v1/test/api"), 405, "method_not_allowed")
    assert "DELETE" in error["message"]


def test_unexpected_exception_in_a_drf_view_is_500_envelope_without_details(api):
    response = api.get("/api/v1/test/boom")
    error = assert_envelope(response, 500, "internal_error")
    assert "secret internal detail" not in response.content.decode()
    assert error["details"] == {}


@pytest.mark.django_db
def test_unexpected_exception_outside_drf_is_500_envelope(client):
    client.raise_request_exception = False
    response = client.get("/api/v1/test/plain-boom")
    assert_envelope(response, 500, "internal_error")
    assert "secret internal detail" not in response.content.decode()


@pytest.mark.django_db
def test_oversized_body_is_413_before_parsing(client, settings):
    body = b"{" + b" " * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10) + b"}"
    response = client.post("/api/v1/test/api", data=body, content_type="application/json")
    assert_envelope(response, 413, "payload_too_large")


@pytest.mark.django_db
def test_every_response_has_a_request_id(client):
    for url in ("/api/v1/test/ok", "/api/v1/nope", "/healthz-missing"):
        assert len(client.get(url)["X-Request-Id"]) >= 16


@pytest.mark.django_db
def test_a_sane_client_request_id_is_echoed(client):
    response = client.get("/api/v1/nope", HTTP_X_REQUEST_ID="trace-abc.123")
    assert response["X-Request-Id"] == "trace-abc.123"
    assert response.json()["error"]["request_id"] == "trace-abc.123"
    hostile = client.get("/api/v1/nope", HTTP_X_REQUEST_ID="<script>" + "x" * 100)
    assert hostile["X-Request-Id"] != "<script>" + "x" * 100
