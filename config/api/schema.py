"""The OpenAPI description shared by every endpoint: the error envelope, the quota and
request-id headers, and the errors each kind of endpoint can answer with."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. invalid_parameter")
    message = serializers.CharField(help_text="A human sentence")
    details = serializers.DictField(help_text="Always an object; names the parameter for a bad one")
    request_id = serializers.CharField(help_text="Same as the X-Request-Id header")


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()

    class Meta:
        ref_name = "Error"


QUOTA_HEADERS = {
    "X-Quota-Requests-Limit": "Requests allowed this UTC month",
    "X-Quota-Requests-Used": "Requests counted this month, this one included",
    "X-Quota-Requests-Remaining": "Requests left this month",
    "X-Quota-Bytes-Limit": "Response bytes allowed this UTC month",
    "X-Quota-Bytes-Used": "Response bytes counted this month, this body included",
    "X-Quota-Bytes-Remaining": "Response bytes left this month",
    "X-Quota-Reset": "Epoch seconds of the next UTC month, when both counters reset",
}

ERRORS = {
    "400": "invalid_parameter (a bad or missing parameter, an unknown format) or invalid_json",
    "401": "unauthorized: no, malformed, unknown or revoked API key",
    "402": "payment_required: the account does not subscribe to the pair (details.reason not_subscribed); "
           "subscribe with POST /api/v1/streams",
    "403": "plan_forbidden: the plan lacks the feature",
    "404": "not_found",
    "415": "unsupported_media_type: Accept admits neither application/json nor application/toon",
    "429": "quota_exceeded: the monthly budget was used up; see Retry-After and details.resets_at",
    "500": "internal_error",
}


PATH_PARAMETERS = {
    "exchange": ("Exchange id, lower case", "binance"),
    "base": ("Base asset symbol", "BTC"),
    "quote": ("Quote asset symbol", "USDT"),
}


BODY_METHODS = ("POST", "PUT", "PATCH")


class ApiAutoSchema(AutoSchema):
    """Requests are described by the input serializers the views validate with
    (`AccountAPIView.inputs`): the body of a POST, the query string of the others."""

    def _input_serializer(self):
        return getattr(self.view, "inputs", {}).get(self.method)

    def get_request_serializer(self):
        serializer = self._input_serializer()
        if serializer is not None and self.method in BODY_METHODS:
            return serializer
        return super().get_request_serializer()

    def get_serializer_name(self, serializer, direction):
        # drf-spectacular adds "Request" to request components itself: SeriesRequest, not
        # SeriesRequestRequest
        name = super().get_serializer_name(serializer, direction)
        return name.removesuffix("Request") if direction == "request" else name

    def get_override_parameters(self):
        """The query serializer's fields, and every path parameter described with a value that
        works in the explorer."""
        parameters = list(super().get_override_parameters())
        serializer = self._input_serializer()
        if serializer is not None and self.method not in BODY_METHODS:
            parameters.append(serializer)
        for name, (description, example) in PATH_PARAMETERS.items():
            if "{" + name + "}" in self.path:
                parameters.append(OpenApiParameter(name, str, OpenApiParameter.PATH, description=description,
                                                   examples=[OpenApiExample(example, value=example)]))
        return parameters

    def _error_codes(self) -> list[str]:
        codes = ["400", "415", "500"]
        if self.view.authentication_classes:
            codes.append("401")
        if any(getattr(p, "plan_feature", None) for p in self.view.permission_classes):
            codes.append("403")
        if "{" in self.path:
            codes.append("404")
        if getattr(self.view, "subscribers_only", False):
            codes.append("402")
        if getattr(self.view, "metered", False):
            codes.append("429")
        return sorted(codes)

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=ERRORS[code]), code, direction=direction)
        return responses

    def _get_response_headers_for_code(self, status_code, direction="response"):
        headers = super()._get_response_headers_for_code(status_code, direction)
        headers["X-Request-Id"] = {"schema": {"type": "string"},
                                   "description": "Identifies the request in our logs"}
        if self.view.authentication_classes and status_code != "401":
            for name, description in QUOTA_HEADERS.items():
                headers[name] = {"schema": {"type": "integer"}, "description": description}
        if status_code == "429":
            headers["Retry-After"] = {"schema": {"type": "integer"},
                                      "description": "Seconds until the next UTC month"}
        return headers


# -- the explorer (postprocessing hooks, SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]) ------

# A working value for the query parameters the explorer would otherwise leave empty (a
# required one left empty cannot be tried at all).
QUERY_EXAMPLES = {"exchange": "binance", "n": 10, "lookback_hours": 24, "limit": 1000}

# The pair a DELETE of a stream is tried with: one the demo account does not stream, so
# "Try it out" as it comes unsubscribes nothing anybody pays for (it answers 204 all the same).
UNSUBSCRIBE_EXAMPLE = {"exchange": "kraken", "base": "ADA", "quote": "USD"}

# Marks an operation the explorer describes but does not run (a stream never finishes).
NO_TRY_IT_OUT = "x-explorer-no-try-it-out"


def explorer_examples(result, generator, request, public):
    """Every parameter the explorer shows gets a value that works: the required query
    parameters, and the pair of a DELETE, which is not one the demo pays for."""
    for path, item in result["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                name, where = parameter["name"], parameter["in"]
                if where == "query" and name in QUERY_EXAMPLES and "example" not in parameter:
                    parameter["example"] = QUERY_EXAMPLES[name]
                if where == "path" and name in PATH_PARAMETERS:
                    value = UNSUBSCRIBE_EXAMPLE[name] if method == "delete" else PATH_PARAMETERS[name][1]
                    parameter["examples"] = {value: {"value": value}}
            if method == "delete":
                operation["description"] = (operation.get("description", "") + "\n\nThe example pair is "
                                             "one the demo account does not stream: trying it changes nothing. "
                                             "Put your own pair to unsubscribe it.").strip()
    return result


def _example_of(parameter: dict):
    """The value the explorer fills in: `example`, or the first of `examples`."""
    if "example" in parameter:
        return parameter["example"]
    return next(iter(parameter.get("examples", {}).values()), {}).get("value")


def _concrete_path(path: str, operation: dict) -> str:
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path":
            path = path.replace("{" + parameter["name"] + "}", str(_example_of(parameter)))
    return path


def _query_string(operation: dict) -> str:
    pairs = [(p["name"], _example_of(p)) for p in operation.get("parameters", [])
             if p["in"] == "query" and p.get("required") and _example_of(p) is not None]
    return ("?" + "&".join(f"{name}={value}" for name, value in pairs)) if pairs else ""


def _body_example(operation: dict) -> dict | None:
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    examples = content.get("examples") or {}
    return next(iter(examples.values()))["value"] if examples else None


def _is_event_stream(operation: dict) -> bool:
    return "text/event-stream" in operation.get("responses", {}).get("200", {}).get("content", {})


def _samples(method: str, url: str, body: dict | None) -> list[dict]:
    """curl, Python (httpx) and JavaScript (fetch) for one request, each failing loudly on an
    error status and printing the body; the key is read from the environment's API_KEY."""
    import json

    upper = method.upper()
    data = json.dumps(body) if body is not None else None
    curl = [f'curl --fail-with-body -X {upper} "{url}"', '  -H "Authorization: Bearer $API_KEY"']
    if data is not None:
        curl += ['  -H "Content-Type: application/json"', f"  -d '{data}'"]
    python_args = [f'    "{url}",', '    headers={"Authorization": f"Bearer {os.environ[\'API_KEY\']}"},']
    if body is not None:
        python_args.append(f"    json={data},")
    python = "\n".join(["import os", "", "import httpx", "", f"response = httpx.request(", f'    "{upper}",',
                        *python_args, ")", "response.raise_for_status()", "print(response.status_code, response.text)"])
    headers = "{Authorization: `Bearer ${process.env.API_KEY}`" + (', "Content-Type": "application/json"'
                                                                     if body is not None else "") + "}"
    fetch_options = [f'  method: "{upper}",', f"  headers: {headers},"]
    if body is not None:
        fetch_options.append(f"  body: JSON.stringify({data}),")
    javascript = "\n".join([f'const response = await fetch("{url}", {{', *fetch_options, "});",
                            "if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);",
                            "console.log(response.status, await response.text());"])
    return [{"lang": "Shell", "label": "curl", "source": " \\\n".join(curl)},
            {"lang": "Python", "label": "Python (httpx)", "source": python},
            {"lang": "JavaScript", "label": "JavaScript (fetch, Node 18+)", "source": javascript}]


def _stream_samples(url: str, token_url: str) -> list[dict]:
    """The live feed, read as it is meant to be: curl and Python hold it open and print each
    event; a browser's EventSource takes a stream token (it cannot send headers)."""
    python = "\n".join([
        "import json", "import os", "", "import httpx", "",
        'headers = {"Authorization": f"Bearer {os.environ[\'API_KEY\']}", "Accept": "text/event-stream"}',
        f'with httpx.stream("GET", "{url}", headers=headers, timeout=None) as response:',
        "    response.raise_for_status()",
        "    event = {}",
        "    for line in response.iter_lines():",
        "        if not line:  # a blank line ends an event",
        '            if "data" in event:',
        '                print(event.get("event"), event.get("id"), json.loads(event["data"]), flush=True)',
        "            event = {}",
        '        elif not line.startswith(":"):  # a ":" line is a keep-alive comment',
        '            field, _, value = line.partition(":")',
        '            event[field] = value.removeprefix(" ")'])
    javascript = "\n".join([
        "// In a browser: EventSource cannot send headers, so ask for a 5-minute stream token first.",
        "async function openFeed(apiKey) {",
        f'  const answer = await fetch("{token_url}", {{',
        '    method: "POST", headers: {Authorization: `Bearer ${apiKey}`},',
        "  });",
        "  if (!answer.ok) throw new Error(`${answer.status}: ${await answer.text()}`);",
        "  const {events_url} = await answer.json();",
        f'  const feed = new EventSource(new URL(events_url, "{url}"));',
        '  feed.addEventListener("status", (e) => console.log("status", JSON.parse(e.data)));',
        '  feed.addEventListener("bar", (e) => console.log("bar", e.lastEventId, JSON.parse(e.data)));',
        '  feed.addEventListener("scheme-event", (e) => console.log("scheme-event", JSON.parse(e.data)));',
        '  feed.addEventListener("stream-closed", (e) => { console.log("closed", JSON.parse(e.data)); feed.close(); });',
        "  return feed;",
        "}"])
    return [{"lang": "Shell", "label": "curl", "source": f'curl -N --fail-with-body -H "Authorization: Bearer $API_KEY" "{url}"'},
            {"lang": "Python", "label": "Python (httpx)", "source": python},
            {"lang": "JavaScript", "label": "JavaScript (EventSource)", "source": javascript}]


def code_samples(result, generator, request, public):
    """`x-codeSamples` (the extension ReDoc reads; our explorer renders it too) on every
    operation, made from its examples: the first request example, the path and required
    query parameters' examples, against the server that served the document. An event
    stream gets reading snippets instead and is marked so the explorer does not try it."""
    base = request.build_absolute_uri("/").rstrip("/") if request is not None else "https://api.example.com"
    for path, item in result["paths"].items():
        for method, operation in item.items():
            url = base + _concrete_path(path, operation)
            if _is_event_stream(operation):
                operation["x-codeSamples"] = _stream_samples(url, url.rsplit("/", 1)[0] + "/token")
                operation[NO_TRY_IT_OUT] = True
            else:
                operation["x-codeSamples"] = _samples(method, url + _query_string(operation),
                                                      _body_example(operation))
    return result
