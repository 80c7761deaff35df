"""The live feed (Server-Sent Events) as an iterator that survives lost connections.

Every `bar` and `scheme-event` carries an id, the client's whole position after it; on a
lost connection (a server restart, a network cut, a `slow_consumer` error) the iterator
reconnects with backoff and sends the last id as `Last-Event-ID`, and the server replays
exactly what came after it. The iterator also drops any event whose position it has
already passed, so a replay can never yield an event twice.

What reconnecting cannot fix ends the iteration with an exception: a refusal at connect
(401, 402, 403, 404) and `stream-closed` (unsubscribed, key revoked, payment lapsed, plan
changed). A 502/503 at connect (the live backend down) is retried like a lost connection."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterable, Iterator

import httpx

from .errors import ProtocolError, StreamClosed, Unavailable
from .models import LiveEvent, SchemeEvent, StreamStatus, typed_row
from .transport import API_PREFIX, USER_AGENT, error_from, pair_path

POSITIONED = ("bar", "scheme-event")
# Longer than the server's 15 s keep-alive: a silent connection this long is a dead one.
READ_TIMEOUT_SECONDS = 45.0


@dataclass(frozen=True)
class SseMessage:
    event: str
    data: str
    id: str | None


class SseParser:
    """Lines of a text/event-stream in, complete messages out (the WHATWG rules this feed
    uses: `event`, `data` (joined by newlines), `id`, `retry`, comment lines)."""

    def __init__(self) -> None:
        self._event, self._data, self._id = "", [], None

    def feed(self, line: str) -> SseMessage | None:
        if not line:
            if not self._data and not self._event:
                return None
            message = SseMessage(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._id = "", [], None
            return message
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


def parse_sse(lines: Iterable[str]) -> Iterator[SseMessage]:
    parser = SseParser()
    for line in lines:
        message = parser.feed(line)
        if message:
            yield message


def position(event_id: str | None) -> tuple[int, int] | None:
    """(last bar ts_ms, last scheme event id) of a feed id such as `1795846957000.42`."""
    if not event_id:
        return None
    try:
        bar, _, scheme = event_id.partition(".")
        return int(bar), int(scheme or 0)
    except ValueError:
        return None


class Backoff:
    """Exponential delays with jitter, back to the first after a connection that worked."""

    def __init__(self, first: float, most: float):
        self.first, self.most, self.attempt = first, most, 0

    def next(self) -> float:
        delay = min(self.most, self.first * 2 ** self.attempt)
        self.attempt += 1
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.attempt = 0


class FeedState:
    """What the sync and async feeds share: the position, the decision on each message,
    and when to give up reconnecting."""

    def __init__(self, pair: str | tuple[str, str, str], last_event_id: str | None, backoff: tuple[float, float],
                 give_up_after: float | None):
        self.path = f"{API_PREFIX}/streams/{pair_path(pair)}/events"
        self.last_event_id = last_event_id
        self.backoff = Backoff(*backoff)
        self.give_up_after = give_up_after
        self.failing_since: float | None = None
        self.reconnects = 0  # connections after the first, for callers who watch the feed's health

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "User-Agent": USER_AGENT, "Cache-Control": "no-cache"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        return headers

    def connected(self, response: httpx.Response) -> None:
        """Raise what a refusal (its body read) means; a 502/503 is raised as Unavailable,
        which is retried."""
        if response.status_code != 200:
            raise error_from(response)
        self.failing_since = None
        self.backoff.reset()

    def failed(self, error: Exception) -> float:
        """The delay before the next attempt, or re-raise when the caller's patience is over."""
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        elif self.give_up_after is not None and now - self.failing_since > self.give_up_after:
            raise error
        self.reconnects += 1
        return self.backoff.next()

    def event_of(self, message: SseMessage) -> LiveEvent | None:
        """The event to yield for a message, None to skip it; raises StreamClosed."""
        if message.event == "stream-closed":
            reason = _json(message.data).get("reason", "closed")
            raise StreamClosed(reason, self.last_event_id)
        if message.event == "error":
            data = _json(message.data)
            # slow_consumer: the server says where we are; reconnecting from there loses nothing
            if data.get("last_event_id"):
                self.last_event_id = data["last_event_id"]
            raise _Reconnect(data.get("code", "error"))
        if message.event in POSITIONED:
            seen, new = position(self.last_event_id), position(message.id)
            if seen and new and new[0] <= seen[0] and new[1] <= seen[1]:
                return None  # already yielded: a replay never repeats an event
            if message.id:
                self.last_event_id = message.id
        data = _json(message.data)
        if message.event == "bar":
            data = typed_row(data)
        elif message.event == "scheme-event":
            data = SchemeEvent.from_wire(data)
        elif message.event == "status":
            data = StreamStatus.from_wire(data)
        return LiveEvent(event=message.event, data=data, id=message.id)


class _Reconnect(Exception):
    """The server asked the client to come back (its `error` event)."""


RETRIED = (httpx.TransportError, Unavailable, _Reconnect)


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError as exc:
        raise ProtocolError(f"unreadable feed event data: {text[:200]!r}") from exc


class LiveFeed:
    """`for event in client.live("binance/BTC/USDT"): ...` — close() (or leaving a `with`
    block) ends it. `last_event_id` is where to resume a later feed from."""

    def __init__(self, http: httpx.Client, api_key: str | None, pair: str | tuple[str, str, str], *,
                 last_event_id: str | None = None, backoff: tuple[float, float] = (0.25, 10.0), give_up_after: float | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self._http, self._api_key, self._sleep = http, api_key, sleep
        self._state = FeedState(pair, last_event_id, backoff, give_up_after)
        self._events = self._run()

    @property
    def last_event_id(self) -> str | None:
        return self._state.last_event_id

    @property
    def reconnects(self) -> int:
        return self._state.reconnects

    def _run(self) -> Iterator[LiveEvent]:
        state = self._state
        while True:
            try:
                with self._http.stream("GET", state.path, headers=state.headers(self._api_key),
                                       timeout=httpx.Timeout(30.0, read=READ_TIMEOUT_SECONDS)) as response:
                    if response.status_code != 200:
                        response.read()
                    state.connected(response)
                    for message in parse_sse(response.iter_lines()):
                        event = state.event_of(message)
                        if event is not None:
                            yield event
                raise _Reconnect("ended")  # the server ended the stream without saying why
            except RETRIED as error:
                self._sleep(state.failed(error))

    def __iter__(self) -> LiveFeed:
        return self

    def __next__(self) -> LiveEvent:
        return next(self._events)

    def close(self) -> None:
        self._events.close()

    def __enter__(self) -> LiveFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncLiveFeed:
    """`async for event in client.live("binance/BTC/USDT"): ...`; `await feed.aclose()` ends it."""

    def __init__(self, http: httpx.AsyncClient, api_key: str | None, pair: str | tuple[str, str, str], *,
                 last_event_id: str | None = None, backoff: tuple[float, float] = (0.25, 10.0),
                 give_up_after: float | None = None, sleep: Callable[[float], Any] = asyncio.sleep):
        self._http, self._api_key, self._sleep = http, api_key, sleep
        self._state = FeedState(pair, last_event_id, backoff, give_up_after)
        self._events = self._run()

    @property
    def last_event_id(self) -> str | None:
        return self._state.last_event_id

    @property
    def reconnects(self) -> int:
        return self._state.reconnects

    async def _run(self) -> AsyncIterator[LiveEvent]:
        state = self._state
        while True:
            try:
                async with self._http.stream("GET", state.path, headers=state.headers(self._api_key),
                                             timeout=httpx.Timeout(30.0, read=READ_TIMEOUT_SECONDS)) as response:
                    if response.status_code != 200:
                        await response.aread()
                    state.connected(response)
                    parser = SseParser()
                    async for line in response.aiter_lines():
                        message = parser.feed(line)
                        if message:
                            event = state.event_of(message)
                            if event is not None:
                                yield event
                raise _Reconnect("ended")
            except RETRIED as error:
                await self._sleep(state.failed(error))

    def __aiter__(self) -> AsyncLiveFeed:
        return self

    async def __anext__(self) -> LiveEvent:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    async def __aenter__(self) -> AsyncLiveFeed:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
