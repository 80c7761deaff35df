"""The API explorer's examples, run as documented against a running server with the seeded
demo: every code sample of every operation (curl, Python httpx, JavaScript fetch, exactly as
the OpenAPI document's x-codeSamples give them) and every request example gets a 2xx, the
live feed's samples read its events, and none of it changes what the demo account pays for."""

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.api.demo_site import demo_billing, demo_server, on_postgres

BODY_METHODS = ("post", "put", "patch")


@pytest.fixture
def transactional_on_postgres(request):
    """The server processes read what the seed committed (PostgreSQL: flushed after)."""
    if on_postgres():
        request.getfixturevalue("transactional_db")


def _document(base: str) -> dict:
    return httpx.get(f"{base}/api/v1/schema", headers={"Accept": "application/vnd.oai.openapi+json"},
                     timeout=30).json()


def _operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                yield path, method, operation


def _run(sample: dict, key: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """One code sample, run as its reader would: curl in a shell, Python, Node."""
    env = {**os.environ, "API_KEY": key}
    command = {"Shell": ["bash", "-c", sample["source"]], "Python": [sys.executable, "-c", sample["source"]],
               "JavaScript": ["node", "--input-type=module", "-e", sample["source"]]}[sample["lang"]]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def test_every_required_parameter_has_an_example_and_deletes_are_tried_on_a_pair_the_demo_does_not_stream(
        transactional_on_postgres, tmp_path):
    with demo_server(tmp_path) as (base, key, env):
        document = _document(base)
        subscribed = {f"{p['exchange']}/{p['base']}/{p['quote']}" for p in httpx.get(
            f"{base}/api/v1/streams", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()["pairs"]
            if p["subscribed"]}
    assert subscribed == {"binance/BTC/USDT", "coinbase/ETH/USD"}
    for path, method, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            if parameter.get("required"):
                assert "example" in parameter or parameter.get("examples"), (method, path, parameter["name"])
        if method == "delete":
            pair = "/".join(next(iter(p["examples"].values()))["value"] for p in operation["parameters"]
                            if p["in"] == "path")
            assert pair.count("/") == 2 and pair not in subscribed, pair


def test_every_code_sample_and_request_example_gets_a_2xx_and_the_demo_s_paid_streams_are_untouched(
        transactional_on_postgres, tmp_path):
    with demo_server(tmp_path) as (base, key, env):
        before = demo_billing(env)
        document = _document(base)
        ran = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            for path, method, operation in _operations(document):
                samples = operation["x-codeSamples"]
                assert [s["lang"] for s in samples] == ["Shell", "Python", "JavaScript"], path
                if operation.get("x-explorer-no-try-it-out"):
                    continue  # the live feed: below
                for sample in samples:
                    assert base in sample["source"]  # the server that served the document
                    done = _run(sample, key)
                    assert done.returncode == 0, (method, path, sample["label"], done.stdout[-300:], done.stderr[-600:])
                    ran.append((method, path, sample["label"]))
                content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
                for example in (content.get("examples") or {}).values():
                    target = next(s for s in samples if s["lang"] == "Shell")["source"].split('"')[1]
                    response = http.request(method.upper(), target, json=example["value"])
                    assert 200 <= response.status_code < 300, (method, path, example, response.text[:300])
        assert len(ran) >= 14 * 3, ran
        assert demo_billing(env) == before


def test_the_live_feed_s_samples_read_its_events_and_it_is_not_tried_in_the_explorer(
        transactional_on_postgres, tmp_path):
    with demo_server(tmp_path) as (base, key, env):
        events = _document(base)["paths"]["/api/v1/streams/{exchange}/{base}/{quote}/events"]["get"]
        assert events["x-explorer-no-try-it-out"] is True
        curl, python, javascript = events["x-codeSamples"]
        assert "new EventSource(" in javascript["source"] and "/token" in javascript["source"]

        # curl holds the stream open: stopped after a few seconds, it has printed the first events
        held = subprocess.run(["bash", "-c", curl["source"].replace("curl -N", "curl -N --max-time 4")],
                              env={**os.environ, "API_KEY": key}, capture_output=True, text=True, timeout=30)
        assert held.returncode == 28, held.stderr  # curl's "operation timed out": the stream stayed open
        assert "event: status" in held.stdout and "retry: 3000" in held.stdout

        reader = subprocess.Popen([sys.executable, "-c", python["source"]], env={**os.environ, "API_KEY": key},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = reader.stdout.readline()  # the status event, printed as it arrives
        finally:
            reader.kill()
            reader.wait(timeout=10)
        name, _, data = first.partition(" None ")
        assert name == "status" and "'state'" in data, first
