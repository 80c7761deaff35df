"""Hostile input generated from our own OpenAPI document (schemathesis).

The schema is fetched from /api/v1/schema of the real ASGI application (config.asgi, the
entry point daphne serves, so the SSE route is included) and every operation in it is
called in-process with positive and negative (schema-violating) data, under a valid Pro
key that has subscriptions and bars, a free-plan key, revoked, unknown, malformed and
missing keys, and assorted Accept headers. Generation is derandomized (the same requests
every run under one PYTHONHASHSEED; schemathesis orders some choices by string hashes, so
other seeds shift a few of the ~1,100 requests) and needs no network.

What every response must show:
- never a 5xx;
- an `X-Request-Id` header;
- every non-2xx body is the API.md envelope (JSON or TOON, as negotiated) whose request_id
  is the header's;
- a 401 carries `WWW-Authenticate: Bearer`.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings as hypothesis_settings, strategies as st

from schemathesis import GenerationMode

from accounts import keys
from accounts.services import api_key_create, api_key_revoke

from .conftest import seed_recent_bars


pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.heavy]

MIN_REQUESTS = 1_000
EXAMPLES = {GenerationMode.POSITIVE: 36, GenerationMode.NEGATIVE: 36}
EVENTS_EXAMPLES = 20  # each open stream is held until the read deadline below
EVENTS_PATH = "/api/v1/streams/{exchange}/{base}/{quote}/events"
REAL_PAIRS = [("binance", "BTC", "USDT"), ("binance", "btc", "usdt"), ("coinbase", "ETH", "USD"),
              ("kraken", "BTC", "EUR"), ("binance", "ETH", "BTC")]
ACCEPTS = [None, None, "application/json", "application/toon", "text/toon", "*/*", "application/*",
           "text/html", "application/xml, application/toon;q=0.1", "application/json;q=0, */*;q=0",
           "text/event-stream", "a" * 300, ";;;,,,q=x"]
REQUEST_IDS = [None, None, "trace-123.abc:1", "<script>alert(1)</script>", "x" * 65, "\u00e9t\u00e9"]


@pytest.fixture
def fuzz_world(make_account, catalog, two_customers):
    a, _ = two_customers
    btc = catalog["binance/BTC/USDT"]
    seed_recent_bars(btc)
    seed_recent_bars(catalog["coinbase/ETH/USD"], base_price=2_500.0)
    free = api_key_create(account=make_account(plan="free"), name="free").plaintext
    revoked = a.keys[1]
    api_key_revoke(api_key=revoked.api_key, via="command")
    payload = "Q" * 12 + "z" * 32
    unknown = f"mdp_live_{payload}{keys.checksum(payload)}"
    authorizations = [f"Bearer {a.key}"] * 12 + [
        None, f"Bearer {free}", f"Bearer {revoked.plaintext}", f"Bearer {unknown}",
        f"Bearer {a.key[:-1]}x", "Bearer", "Basic dXNlcjpwYXNz", f"bearer   {a.key}  ", "Bearer \xff\xfe"]
    return {"authorizations": authorizations, "key": a.key}


def header(response, name: str) -> str | None:
    """A header of schemathesis' response (lower-case names, lists of values)."""
    values = response.headers.get(name.lower())
    return values[0] if values else None


def decode_body(response):
    content_type = header(response, "Content-Type") or ""
    if content_type.startswith("application/toon"):
        import toon_format

        return toon_format.decode(response.content.decode())
    return json.loads(response.content)


def problems_with(response) -> list[str]:
    found = []
    status = response.status_code
    request_id = header(response, "X-Request-Id")
    if status >= 500:
        found.append(f"status {status}")
    if not request_id:
        found.append("no X-Request-Id")
    if status == 401 and not (header(response, "WWW-Authenticate") or "").startswith("Bearer"):
        found.append("401 without WWW-Authenticate: Bearer")
    if status >= 300:
        try:
            body = decode_body(response)
        except Exception as exc:  # noqa: BLE001 - any undecodable body is a finding
            return found + [f"undecodable error body ({exc!r}): {response.content[:200]!r}"]
        error = body.get("error") if isinstance(body, dict) else None
        if not (isinstance(body, dict) and set(body) == {"error"} and isinstance(error, dict)):
            found.append(f"not the envelope: {response.content[:200]!r}")
        elif not (set(error) == {"code", "message", "details", "request_id"}
                  and isinstance(error["code"], str) and error["code"]
                  and isinstance(error["message"], str) and error["message"]
                  and isinstance(error["details"], dict)
                  and error["request_id"] == request_id):
            found.append(f"malformed envelope: {error!r}")
    return found


def _override(case, data, world) -> None:
    """Point part of the generated requests at real pairs, symbols and dates so they reach
    the code behind validation; set the Authorization, Accept and X-Request-Id headers."""
    path_parameters = case.path_parameters
    if path_parameters is not None and {"exchange", "base", "quote"} <= set(path_parameters):
        if data.draw(st.booleans(), label="real pair in path"):
            exchange, base, quote = data.draw(st.sampled_from(REAL_PAIRS), label="pair")
            path_parameters.update(exchange=exchange, base=base, quote=quote)
    body = case.body
    if isinstance(body, dict) and data.draw(st.booleans(), label="real values in body"):
        path = case.operation.path
        if path == "/api/v1/streams":
            exchange, base, quote = data.draw(st.sampled_from(REAL_PAIRS), label="pair")
            body.update(exchange=exchange, base=base, quote=quote)
        elif path.startswith("/api/v1/market/"):
            body.update(exchange="binance", symbol=data.draw(st.sampled_from(["BTC-USDT", "eth-btc", "BTC-EUR"])))
            today = time.strftime("%Y-%m-%d", time.gmtime())
            for name in ("start", "end"):
                value = data.draw(st.sampled_from([None, today, "9999-12-31", "0001-01-01"]), label=name)
                if value is not None:
                    body[name] = value
    query = case.query
    if case.operation.path == "/api/v1/rank/top" and isinstance(query, dict) and data.draw(st.booleans()):
        query["exchange"] = data.draw(st.sampled_from(["binance", "KRAKEN", "coinbase"]))
    # Sent as call() headers: schemathesis' ASGI client would otherwise put its own
    # defaults (Accept: */*) over the case's headers.
    for name in [h for h in (case.headers or {}) if h.lower() in ("authorization", "accept", "x-request-id")]:
        del case.headers[name]
    extra = {}
    for name, choices in (("Authorization", world["authorizations"]), ("Accept", ACCEPTS),
                          ("X-Request-Id", REQUEST_IDS)):
        value = data.draw(st.sampled_from(choices), label=name)
        if value is not None:
            extra[name] = value
    return extra


def test_generated_requests_to_every_operation_never_fail_and_always_answer_in_the_envelope(
        asgi_application, fuzz_world):
    schema = schemathesis.openapi.from_asgi("/api/v1/schema", asgi_application,
                                            headers={"Accept": "application/json"})
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15, [op.label for op in operations]  # /v1/me/usage is served, documented once

    sent: Counter = Counter()
    unsendable: Counter = Counter()
    statuses: Counter = Counter()
    findings: list[str] = []
    started = time.monotonic()

    for operation in operations:
        is_events = operation.path == EVENTS_PATH
        for mode, examples in EXAMPLES.items():
            strategy = operation.as_strategy(generation_mode=mode)

            @hypothesis_settings(max_examples=EVENTS_EXAMPLES if is_events else examples, derandomize=True,
                                 database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
                                 suppress_health_check=list(HealthCheck))
            @given(data=st.data())
            def call(data):
                case = data.draw(strategy, label="case")
                headers = _override(case, data, fuzz_world)
                try:
                    response = case.call(headers=headers, timeout=0.5 if is_events else 30)
                except (requests.exceptions.InvalidHeader, UnicodeEncodeError) as exc:
                    unsendable[type(exc).__name__] += 1  # the HTTP client itself refuses to send it
                    return
                sent[operation.label] += 1
                statuses[response.status_code] += 1
                for problem in problems_with(response):
                    findings.append(f"{mode.value} {case.method} {case.formatted_path} "
                                    f"query={case.query!r} body={case.body!r} "
                                    f"headers={dict(response.request.headers)!r} "
                                    f"-> {response.status_code}: {problem}")

            call()

    elapsed = time.monotonic() - started
    total = sum(sent.values())
    print(f"\nschemathesis: {total} requests in {elapsed:.1f} s over {len(operations)} operations; "
          f"statuses {dict(sorted(statuses.items()))}; per operation {dict(sent)}; "
          f"not sendable by the client {dict(unsendable)}")
    assert not findings, f"{len(findings)} bad responses, first ones:\n" + "\n".join(findings[:25])
    assert total >= MIN_REQUESTS
    assert all(sent[op.label] > 0 for op in operations)
    assert any(200 <= status < 300 for status in statuses), "no request reached a successful answer"
