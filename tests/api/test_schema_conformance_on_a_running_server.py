"""The OpenAPI document a running server serves is the contract it enforces: it is generated
from the input serializers the views validate with, so every documented example is
answered, every required field left out is refused naming it, and schemathesis, with every
check (positive and negative conformance, response schemas, the stateful phase), finds
nothing."""

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.servers import daphne_processes, embedded_site

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BODY_METHODS = ("post", "put", "patch")


def _document(url: str) -> dict:
    return httpx.get(f"{url}/api/v1/schema", headers={"Accept": "application/vnd.oai.openapi+json"},
                     timeout=30).json()


def _concrete(path: str, operation: dict) -> str:
    """The path with each path parameter's documented example."""
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path":
            value = next(iter(parameter["examples"].values()))["value"]
            path = path.replace("{" + parameter["name"] + "}", value)
    return path


def _operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation and not path.endswith("/events"):
                yield path, method, operation


def _body(document: dict, operation: dict) -> tuple[dict, list[dict]]:
    """The request body's schema and its documented examples."""
    content = operation["requestBody"]["content"]["application/json"]
    name = content["schema"]["$ref"].rsplit("/", 1)[-1]
    return document["components"]["schemas"][name], [e["value"] for e in content.get("examples", {}).values()]


def test_every_documented_example_is_answered_and_every_required_field_left_out_is_refused_naming_it(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    with daphne_processes(1, env=env) as (url,), httpx.Client(
            base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as http:
        document = _document(url)
        assert http.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC",
                                                  "quote": "USDT"}).status_code in (200, 201)
        examples_sent = required_checked = 0
        for path, method, operation in _operations(document):
            target = _concrete(path, operation)
            if method in BODY_METHODS and "requestBody" in operation:
                schema, examples = _body(document, operation)
                for example in examples:
                    response = http.request(method, target, json=example)
                    assert 200 <= response.status_code < 300, (method, path, example, response.text[:300])
                    examples_sent += 1
                base = examples[0] if examples else {}
                for field in schema.get("required", []):
                    response = http.request(method, target, json={k: v for k, v in base.items() if k != field})
                    assert response.status_code == 400, (method, path, field, response.text[:300])
                    error = response.json()["error"]
                    assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == field, error
                    assert field in error["message"]
                    required_checked += 1
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter.get("required"):
                    response = http.request(method, target)
                    assert response.status_code == 400, (method, path, parameter["name"])
                    assert response.json()["error"]["details"]["parameter"] == parameter["name"]
                    required_checked += 1
        assert examples_sent >= 8 and required_checked >= 20, (examples_sent, required_checked)
        assert http.get("/api/v1/rank/top", params={"exchange": "binance"}).status_code == 200


def test_schemathesis_with_every_check_finds_no_failure(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    with daphne_processes(1, env=env) as (url,):
        run = subprocess.run(
            [str(Path(sys.executable).with_name("st")), "--config-file", str(ROOT / "schemathesis.toml"),
             "--no-color", "run", f"{url}/api/v1/schema", "--checks", "all",
             "--header", f"Authorization: Bearer {key}", "--max-examples", "15", "--request-timeout", "1",
             "--seed", "20261124"],
            cwd=tmp_path, capture_output=True, text=True, timeout=900,
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks", "PYTHONPATH": str(ROOT)})
    summary = run.stdout[-6000:]
    assert run.returncode == 0, summary
    assert "No issues found" in summary or " passed" in summary, summary
    assert "cannot validate application/toon" not in summary, summary  # TOON answers are checked too
