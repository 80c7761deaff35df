"""A running server (embedded, as `make run` serves it) refuses what it does not take,
naming it: unknown body and query fields (a typo must never silently change the answer)
and a method the path does not serve (the message names the method to use)."""

import httpx

from tests.integration.servers import daphne_processes, embedded_site

CANDLES = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2026-10-01", "end": "2026-10-31"}


def test_unknown_fields_and_wrong_methods_are_refused_with_a_message_naming_them(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    with daphne_processes(1, env=env) as (url,), httpx.Client(
            base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as http:
        typo = http.post("/api/v1/market/candlestick", json={**CANDLES, "resolutoin": "hourly"})
        assert typo.status_code == 400
        error = typo.json()["error"]
        assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == "resolutoin"
        assert "resolutoin" in error["message"] and "resolution" in error["message"]
        assert http.post("/api/v1/market/candlestick", json=CANDLES).status_code == 200

        as_toon = http.post("/api/v1/market/candlestick", json={**CANDLES, "resolutoin": "hourly"},
                            headers={"Accept": "application/toon"})
        assert as_toon.status_code == 400 and as_toon.headers["content-type"].startswith("application/toon")
        assert b"resolutoin" in as_toon.content

        query = http.get("/api/v1/streams/binance/BTC/USDT/schemes", params={"lookbak_hours": 2})
        assert query.status_code == 400 and query.json()["error"]["details"]["parameter"] == "lookbak_hours"
        assert http.get("/api/v1/streams/binance/BTC/USDT/schemes", params={"lookback_hours": 2}).status_code in (200, 402)
        assert http.get("/api/v1/me/usage", params={"month": "2026-10"}).status_code == 400

        # a form body reaches the API as it came (the server does not parse it first): not JSON
        form = http.post("/api/v1/market/candlestick", data=CANDLES)
        multipart = http.post("/api/v1/market/candlestick", data=CANDLES, files={"f": ("a.csv", b"x")})
        for refused in (form, multipart):
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_json"

        wrong = http.get("/api/v1/market/candlestick")
        assert wrong.status_code == 405
        error = wrong.json()["error"]
        assert error["code"] == "method_not_allowed" and "use POST" in error["message"]
        assert error["details"]["allowed"] == ["POST"] and "POST" in wrong.headers["allow"]


def test_the_served_openapi_document_marks_what_the_server_enforces_and_lists_each_path_once(tmp_path):
    env, _ = embedded_site(tmp_path)
    with daphne_processes(1, env=env) as (url,):
        document = httpx.get(f"{url}/api/v1/schema", headers={"Accept": "application/vnd.oai.openapi+json"},
                             timeout=30).json()
    paths = document["paths"]
    assert "/api/v1/me/usage" in paths and "/v1/me/usage" not in paths  # the alias is served, documented once
    schemas = document["components"]["schemas"]
    for path in ("/api/v1/market/candlestick", "/api/v1/market/trades", "/api/v1/market/spread"):
        body = paths[path]["post"]["requestBody"]["content"]["application/json"]
        required = schemas[body["schema"]["$ref"].rsplit("/", 1)[-1]]["required"]
        assert {"exchange", "symbol", "start", "end"} <= set(required), path
        example = next(iter(body["examples"].values()))["value"]
        assert example["symbol"] == "BTC-USDT" and example["end"] == "2026-10-31"
    limit_orders = paths["/api/v1/market/limit-orders"]["post"]["requestBody"]["content"]["application/json"]
    assert "end" not in schemas[limit_orders["schema"]["$ref"].rsplit("/", 1)[-1]]["required"]  # default today
    status = paths["/api/v1/streams/{exchange}/{base}/{quote}/status"]["get"]["parameters"]
    examples = {p["name"]: next(iter(p["examples"].values()))["value"] for p in status if p["in"] == "path"}
    assert examples == {"exchange": "binance", "base": "BTC", "quote": "USDT"}
    unsummarised = [(path, method) for path, item in paths.items() for method, operation in item.items()
                    if isinstance(operation, dict) and "responses" in operation and not operation.get("summary")
                    and not path.startswith("/api/v1/test/")]  # the test server's own measuring routes
    assert unsummarised == []
