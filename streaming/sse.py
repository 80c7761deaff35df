"""GET /api/v1/streams/{exchange}/{base}/{quote}/events: the live SSE feed.

An ASGI application, routed by channels' URLRouter in config/asgi.py ahead of Django's
handler: an open stream is one coroutine and a listener, with no thread held (Django's
handler keeps a thread per request for as long as the response streams). Authorisation runs once, in a
worker thread, before anything is sent; refusals are JSON envelopes with their status,
whatever the Accept header says.

Events: `bar` (each live 1-second bar, with the fields of the subscribed metrics),
`scheme-event`, `status` (at connect and on state changes), `stream-reset` (the
Last-Event-ID could not be resumed), `stream-closed` (unsubscribed, key revoked, payment
lapsed) and `error` (fell too far behind). Every bar and scheme event carries
`id: <last bar ts_ms>.<last scheme event id>`, which resumes the stream without loss as
Last-Event-ID (header or ?lastEventId=). Opening or holding a stream is never metered."""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, unquote

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.urls import re_path
from django_eventstream.views import Listener, get_listener_manager

from config.api.errors import ApiError, TemporarilyUnavailable, dependency_unavailable, request_id_from
from config.api.renderers import to_json_bytes

from . import hub, snapshot
from .sse_auth import StreamGrant, authorize, grants_withdrawn

logger = logging.getLogger(__name__)



class StreamListener(Listener):
    """django-eventstream's listener, woken directly when the event is queued on the
    listener's own loop (the Redis bridge runs there): the library's wake,
    `call_soon_threadsafe`, writes to the loop's wake-up pipe once per listener, a system
    call per stream per bar. From another thread (embedded mode's ingestion) it still wakes
    the loop that way."""

    def wake_threadsafe(self):
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is self.loop:
            self.aevent.set()
        else:
            super().wake_threadsafe()


@functools.cache
def _connect_executor() -> ThreadPoolExecutor:
    """The threads that authorise connects: a connect spends its time waiting on the
    database and the key cache, so with asyncio's default executor (six threads on two
    cores) the process opened ~160 streams/s at 40 % of a core."""
    return ThreadPoolExecutor(max_workers=settings.SSE_CONNECT_THREADS, thread_name_prefix="sse-connect")


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def _refuse(send, error: ApiError, request_id: str) -> None:
    body = to_json_bytes(error.envelope(request_id))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"x-request-id", request_id.encode()), (b"cache-control", b"no-store"),
               (b"x-content-type-options", b"nosniff")]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def encode(event: str, data, event_id: str | None = None) -> bytes:
    head = f"event: {event}\n" + (f"id: {event_id}\n" if event_id else "")
    return head.encode() + b"data: " + orjson.dumps(data) + b"\n\n"


class Stream:
    """One open stream: the client's grant, its cursor and what it may see."""

    def __init__(self, grant: StreamGrant, send):
        self.grant = grant
        self.send = send
        self.metrics = list(grant.metrics)
        # the client's position: where it resumes from, or the pair's present for a fresh stream
        self.bar_ts, self.scheme_id = grant.position
        self.withdrawn: str | None = None  # set by the grant watcher: why the stream must close
        self.gone = False  # the client left
        self.sent_at = 0.0  # loop time of the last write
        self.keep_alive_due = False

    @property
    def cursor(self) -> str:
        return f"{self.bar_ts}.{self.scheme_id}"

    def bar_event(self, row: dict, cache: dict | None = None) -> bytes | None:
        """The bar for this stream's metrics; `cache` (one per published bar) lets the
        streams that share a metric set share one encoding."""
        ts = row["ts_ms"]
        if ts <= self.bar_ts:
            return None  # already sent by the replay
        self.bar_ts = ts
        key = tuple(self.metrics)
        data = cache.get(key) if cache is not None else None
        if data is None:
            fields = snapshot.columns(self.metrics)
            data = orjson.dumps({name: row[name] for name in fields if name in row})
            if cache is not None:
                cache[key] = data
        return b"event: bar\nid: " + self.cursor.encode() + b"\ndata: " + data + b"\n\n"

    def scheme_event(self, data: dict) -> bytes | None:
        if data.get("id", 0) <= self.scheme_id:
            return None
        self.scheme_id = data["id"]
        return encode("scheme-event", data, self.cursor)

    def control(self, data: dict) -> str | None:
        """The reason to close this stream, if the control message concerns it."""
        grant = self.grant
        kind = data.get("kind")
        if kind == "revoked" and grant.key_id is not None and data.get("key_id") == grant.key_id:
            return "the API key was revoked"
        if kind == "lapsed" and data.get("account_id") == grant.account_id:
            return "the account's payment lapsed"
        if kind == "unsubscribed" and data.get("account_id") == grant.account_id and \
                data.get("pair_id") == grant.pair_id:
            if not data.get("metrics"):
                return "the pair was unsubscribed"
            self.metrics = list(data["metrics"])
        return None


async def app(scope, receive, send) -> None:
    headers = _headers(scope)
    request_id = request_id_from(headers.get("x-request-id"))
    if scope["method"] not in ("GET", "HEAD"):
        from config.api.errors import MethodNotAllowed

        await _refuse(send, MethodNotAllowed(f"Method \"{scope['method']}\" not allowed.",
                                             headers={"Allow": "GET, HEAD"}), request_id)
        return
    route = scope["url_route"]["kwargs"]
    exchange, base, quote = (unquote(route[name]) for name in ("exchange", "base", "quote"))
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    token = query.get("token", [None])[0]
    last_event_id = headers.get("last-event-id") or query.get("lastEventId", [None])[0]

    listener = StreamListener()
    listener.assign_loop()
    manager = get_listener_manager()

    def listen(pair_id: int) -> None:
        listener.channels = {hub.pair_channel(pair_id), hub.CONTROL}
        manager.add_listener(listener)

    try:
        if not await hub.backend_available():
            await _refuse(send, TemporarilyUnavailable(), request_id)
            return
        try:
            grant = await sync_to_async(authorize, thread_sensitive=False, executor=_connect_executor())(
                authorization=headers.get("authorization"), token=token, exchange=exchange, base=base,
                quote=quote, last_event_id=last_event_id, listen=listen)
        except Exception as exc:  # the database (or Redis) went away: refuse in the envelope
            unavailable = dependency_unavailable(exc)
            if unavailable is None:
                raise
            await _refuse(send, unavailable, request_id)
            return
        if isinstance(grant, ApiError):
            await _refuse(send, grant, request_id)
            return
        await _serve(grant, listener, receive, send, request_id, scope["method"] == "HEAD")
    except Exception:
        logger.exception("SSE stream failed")
    finally:
        if listener.channels:
            try:
                manager.remove_listener(listener)
            except KeyError:
                pass


async def _serve(grant: StreamGrant, listener: Listener, receive, send, request_id: str, head_only: bool) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache, no-transform"),
        (b"x-accel-buffering", b"no"), (b"x-request-id", request_id.encode()),
        (b"x-content-type-options", b"nosniff")]})
    if head_only:
        await send({"type": "http.response.body", "body": b""})
        return
    stream = Stream(grant, send)
    _watched[stream] = listener
    _watch_grants()
    try:
        await _stream(stream, grant, listener, receive, send)
    finally:
        _watched.pop(stream, None)


KEEP_ALIVE = b": keep-alive\n\n"


async def _stream(stream: Stream, grant: StreamGrant, listener: Listener, receive, send) -> None:
    """Send the opening, then whatever wakes the listener: events, the grant watcher (a
    withdrawn grant, a keep-alive due) or the client leaving. A stream waits on its
    listener's event alone, so a bar wakes each stream with no task or timer of its own."""
    opening = [f"retry: {settings.SSE_RETRY_MS}\n\n".encode()]
    if grant.reset is not None:
        opening.append(encode("stream-reset", grant.reset))
    if grant.status is not None:
        opening.append(encode("status", grant.status))
    for kind, payload in grant.replay:
        piece = (stream.bar_event(snapshot.row(payload, ["trade", "book", "quote"], grant.circulating_supply, grant.rounding))
                 if kind == "bar" else stream.scheme_event(payload))
        if piece:
            opening.append(piece)
    loop = asyncio.get_running_loop()
    await send({"type": "http.response.body", "body": b"".join(opening), "more_body": True})
    stream.sent_at = loop.time()

    disconnected = asyncio.ensure_future(_wait_disconnect(receive, stream, listener))
    try:
        while True:
            await listener.aevent.wait()
            listener.aevent.clear()
            if stream.gone:
                break
            if stream.withdrawn:
                await send({"type": "http.response.body", "more_body": False,
                            "body": encode("stream-closed", {"reason": stream.withdrawn})})
                break
            pieces, closing = _drain(stream, listener)
            if stream.keep_alive_due:
                stream.keep_alive_due = False
                if not pieces and not closing:
                    pieces = [KEEP_ALIVE]
            if pieces:
                await send({"type": "http.response.body", "body": b"".join(pieces), "more_body": bool(not closing)})
                stream.sent_at = loop.time()
            if closing:
                if not pieces:
                    await send({"type": "http.response.body", "body": b""})
                break
    finally:
        disconnected.cancel()


# The open streams of this process and their listeners, and the task looking after them:
# one per event loop (a listener wakes only on its own loop), running while that loop has
# open streams.
_watched: dict[Stream, Listener] = {}
_watchers: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}


def _watch_grants() -> None:
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None or watcher.done():
        for stale in [other for other, task in _watchers.items() if task.done() or other.is_closed()]:
            del _watchers[stale]
        _watchers[loop] = loop.create_task(_look_after_streams(loop))


async def _look_after_streams(loop: asyncio.AbstractEventLoop) -> None:
    """Every SSE_GRANT_RECHECK_SECONDS while streams are open: wake the streams that sent
    nothing for SSE_KEEPALIVE_SECONDS (they send a keep-alive comment), and close those whose
    grant no longer holds (see grants_withdrawn; the stream says why in `stream-closed`)."""
    check = sync_to_async(grants_withdrawn, thread_sensitive=False)

    def open_here() -> list[tuple[Stream, Listener]]:
        return [(stream, listener) for stream, listener in list(_watched.items())
                if listener.loop is loop and stream.withdrawn is None]

    while any(listener.loop is loop for listener in list(_watched.values())):
        await asyncio.sleep(settings.SSE_GRANT_RECHECK_SECONDS)
        watched = open_here()
        if not watched:
            continue
        quiet_since = loop.time() - settings.SSE_KEEPALIVE_SECONDS
        for stream, listener in watched:
            if stream.sent_at <= quiet_since:
                stream.keep_alive_due = True
                listener.aevent.set()
        try:
            withdrawn = await check([stream.grant for stream, _ in watched])
        except Exception:  # the database is away: the next round asks again
            logger.warning("Could not re-check the open streams' grants", exc_info=True)
            continue
        for n, reason in withdrawn.items():
            stream, listener = watched[n]
            stream.withdrawn = reason
            listener.aevent.set()


def _drain(stream: Stream, listener: Listener) -> tuple[list[bytes], bool]:
    """The pending events of the listener, encoded; True when the stream must end."""
    with get_listener_manager().lock:
        items, listener.channel_items = listener.channel_items, {}
        overflow, listener.overflow = listener.overflow, False
    pieces: list[bytes] = []
    for channel, events in items.items():
        for event in events:
            if channel == hub.CONTROL:
                reason = stream.control(event.data)
                if reason:
                    pieces.append(encode("stream-closed", {"reason": reason}))
                    return pieces, True
            elif event.type == "bars":
                encodings = _encodings(event)
                for n, row in enumerate(event.data["rows"]):
                    piece = stream.bar_event(row, encodings.setdefault(n, {}))
                    if piece:
                        pieces.append(piece)
            elif event.type == "scheme-events":
                for data in event.data["events"]:
                    piece = stream.scheme_event(data)
                    if piece:
                        pieces.append(piece)
            elif event.type == "status":
                pieces.append(encode("status", event.data))
    if overflow:
        pieces.append(encode("error", {"code": "slow_consumer", "message":
                                       "The client fell too far behind; reconnect with Last-Event-ID to resume.",
                                       "last_event_id": stream.cursor}))
        return pieces, True
    return pieces, False


def _encodings(event) -> dict:
    """Per published event, its bars' encodings (by row, then by metric set), shared by
    every stream."""
    cache = getattr(event, "_encodings", None)
    if cache is None:
        cache = event._encodings = {}
    return cache


async def _wait_disconnect(receive, stream: Stream, listener: Listener) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream.gone = True
            listener.aevent.set()
            return


# For channels' URLRouter (config/asgi.py): the feed's one route.
urlpatterns = [re_path(r"^api/v1/streams/(?P<exchange>[^/]+)/(?P<base>[^/]+)/(?P<quote>[^/]+)/events/?$", app)]
