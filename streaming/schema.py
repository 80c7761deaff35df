"""The SSE endpoint in the OpenAPI document (it is an ASGI app, not a Django route)."""

EVENTS_PATH = "/api/v1/streams/{exchange}/{base}/{quote}/events"


# One event of the stream (OpenAPI 3.0 describes a text/event-stream by its events). `data`
# is one line of JSON: the bar, the scheme event, the status document of GET .../status, or
# {"reason": ...} for stream-reset, stream-closed and error (docs/SSE.md).
EVENT = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["bar", "scheme-event", "status", "stream-reset", "stream-closed", "error"]},
        "data": {"type": "string", "description": "JSON"},
        "id": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+$",
               "description": "<last bar ts_ms>.<last scheme event id>: resume with Last-Event-ID"},
        "retry": {"type": "integer", "minimum": 0},
    },
    "required": ["event", "data"],
}


def add_events_endpoint(result, generator, request, public):
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    pair_params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                   for name in ("exchange", "base", "quote")]
    result["paths"][EVENTS_PATH] = {"get": {
        "operationId": "streams_events",
        "summary": "Live feed of a subscribed pair (Server-Sent Events)",
        "tags": ["streams"],
        "description": (
            "`text/event-stream` with events `bar` (each live 1-second bar, fields of the subscribed "
            "metrics), `scheme-event`, `status` (at connect and on state changes), `stream-reset`, "
            "`stream-closed` and `error` (client fell behind). Each bar and scheme event has an `id` to "
            "resume from with `Last-Event-ID` (header) or `?lastEventId=`. A `: keep-alive` comment every "
            "15 s. Browsers pass `?token=` from `POST .../token` instead of the header. Never metered; "
            "refusals are JSON envelopes."),
        "parameters": pair_params + [
            {"name": "token", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "Short-lived stream token (EventSource)"},
            {"name": "lastEventId", "in": "query", "required": False, "schema": {"type": "string"}},
            {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}}],
        "security": [{"ApiKey": []}, {}],
        "responses": {
            "200": {"description": "The event stream", "content": {"text/event-stream": {"schema": EVENT}}},
            "401": {"description": "unauthorized", "content": error},
            "402": {"description": "payment_required: pair not subscribed, or payment lapsed", "content": error},
            "403": {"description": "plan_forbidden", "content": error},
            "404": {"description": "not_found", "content": error},
            "502": {"description": "temporarily_unavailable: the live backend is down", "content": error},
        },
    }}
    return result
