"""The OpenAPI document covers every API route, and the explorer works offline."""

import re

import pytest

from tests.urlconf import url_routes


def _api_routes():
    for route in url_routes():
        if route.startswith("api/v1/") and "(?P<rest>" not in route and route not in ("api/v1/schema", "api/v1/docs"):
            yield "/" + route


def _as_openapi_path(route: str) -> str:
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    from drf_spectacular.generators import SchemaGenerator

    with django_db_blocker.unblock():
        return SchemaGenerator().get_schema(request=None, public=True)


def test_every_api_route_is_in_the_schema(schema):
    routes = {_as_openapi_path(r) for r in _api_routes()}
    assert routes, "no API routes found"
    missing = routes - set(schema["paths"])
    assert not missing, f"routes missing from the OpenAPI schema: {sorted(missing)}"


def test_schema_documents_bearer_auth_formats_and_errors(schema):
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    usage = schema["paths"]["/api/v1/me/usage"]["get"]
    assert {"application/json", "application/toon"} <= set(usage["responses"]["200"]["content"])
    assert "401" in usage["responses"] and "429" not in usage["responses"]
    assert usage["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert "X-Quota-Requests-Used" in usage["responses"]["200"]["headers"]
    assert "X-Request-Id" in usage["responses"]["200"]["headers"]
    assert "Error" in schema["components"]["schemas"]


@pytest.mark.django_db
def test_schema_and_explorer_are_served_without_a_key(client):
    response = client.get("/api/v1/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")
    page = client.get("/api/v1/docs")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html and "cdn" not in html.lower()


def test_the_sse_endpoint_is_documented(schema):
    events = schema["paths"]["/api/v1/streams/{exchange}/{base}/{quote}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    assert {"401", "402", "403", "404", "502"} <= set(events["responses"])
