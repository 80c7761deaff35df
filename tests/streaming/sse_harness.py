"""Drive the SSE ASGI app in-process: open a stream, read events, disconnect."""

from __future__ import annotations

import asyncio

import orjson
from channels.routing import URLRouter

from streaming import sse


def parse_events(raw: bytes) -> list[dict]:
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        event = {"event": "message", "data": None, "id": None, "comment": False}
        for line in block.split("\n"):
            if line.startswith(":"):
                event["comment"] = True
            elif line.startswith("event: "):
                event["event"] = line[7:]
            elif line.startswith("id: "):
                event["id"] = line[4:]
            elif line.startswith("data: "):
                event["data"] = orjson.loads(line[6:])
            elif line.startswith("retry: "):
                event["event"], event["data"] = "retry", int(line[7:])
        events.append(event)
    return events


class OpenStream:
    def __init__(self, path: str, headers: dict[str, str] | None = None, query: str = ""):
        self.scope = {"type": "http", "method": "GET", "path": path, "query_string": query.encode(),
                      "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
        self.status = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.finished = False
        self._disconnect = asyncio.Event()
        self._changed = asyncio.Event()
        self._sent_request = False

    async def _receive(self):
        if not self._sent_request:
            self._sent_request = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._disconnect.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            self.body += message.get("body", b"")
            if not message.get("more_body"):
                self.finished = True
        self._changed.set()

    def start(self):
        self.task = asyncio.ensure_future(URLRouter(sse.urlpatterns)(self.scope, self._receive, self._send))
        return self

    @property
    def events(self) -> list[dict]:
        return [e for e in parse_events(self.body) if not e["comment"]]

    async def until(self, predicate, timeout: float = 5.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate(self):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"timed out; status={self.status} body={self.body[-2000:]!r}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
            if self.task.done() and self.task.exception():
                raise self.task.exception()
        return self

    async def close(self):
        self._disconnect.set()
        await asyncio.wait_for(self.task, 5)

    def json(self):
        return orjson.loads(self.body)
