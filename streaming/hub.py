"""Fan-out of live events to the SSE connections of this server process.

django-eventstream's ListenerManager holds the listeners of this process by channel, with a
bounded queue per listener (a listener that falls behind is flagged as overflowed). Events
reach it from wherever they are published:
  - embedded mode: straight from the publishing thread (ingestion runs in-process);
  - full mode: through one Redis pub/sub channel, which a single bridge task per server
    process subscribes to and feeds into the manager, reconnecting by itself when Redis
    comes back.
Channels: `pair-<id>` (bars, scheme events, status) and `control` (closing streams)."""

from __future__ import annotations

import asyncio
import logging

import orjson
from django.conf import settings
from django_eventstream.event import Event
from django_eventstream.views import get_listener_manager  # noqa: F401  (tests reach it through here)

logger = logging.getLogger(__name__)

def redis_channel(redis_url: str | None = None) -> str:
    """The pub/sub channel of this deployment. Pub/sub ignores the database index, so the
    index is in the name: deployments (or test runs) sharing one Redis server on different
    databases never see each other's events."""
    from urllib.parse import urlparse

    database = urlparse(redis_url if redis_url is not None else settings.REDIS_URL).path.strip("/") or "0"
    return f"mdp:live-events:{database}"

CONTROL = "control"


def pair_channel(pair_id: int) -> str:
    return f"pair-{pair_id}"


def publish(channel: str, event_type: str, data: dict) -> None:
    """Hand an event to every server process's listeners (from any thread)."""
    if settings.REDIS_URL:
        _redis_client().publish(redis_channel(), orjson.dumps({"c": channel, "t": event_type, "d": data}))
    else:
        get_listener_manager().add_to_queues(channel, Event(channel, event_type, data))


def publish_many(events: list[tuple[str, str, dict]]) -> None:
    """`publish` for (channel, event type, data) triples, in one round trip to Redis."""
    if not settings.REDIS_URL:
        for channel, event_type, data in events:
            publish(channel, event_type, data)
        return
    name = redis_channel()
    pipe = _redis_client().pipeline(transaction=False)
    for channel, event_type, data in events:
        pipe.publish(name, orjson.dumps({"c": channel, "t": event_type, "d": data}))
    pipe.execute()


def _redis_client():
    """A client on the process's pool (config/redis.py)."""
    from config.redis import client

    return client()


class RedisBridge:
    """Redis pub/sub → this process's listeners. One per process, started on first use."""

    def __init__(self, url: str):
        self.url = url
        self.healthy = False
        self.task: asyncio.Task | None = None
        self._ready = asyncio.Event()

    def ensure_running(self) -> None:
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.healthy = False
            self._ready = asyncio.Event()
            self.task = loop.create_task(self._run())

    async def wait_ready(self, timeout: float) -> bool:
        if self.healthy:
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return self.healthy

    async def _run(self) -> None:
        """Subscribe and feed the listeners; on any failure wait 0.2 s, doubling up to 5 s
        (no jitter: one bridge per process), and subscribe again, forever. The waits start
        again from 0.2 s once a subscription has worked."""
        from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential

        manager = get_listener_manager()
        async for attempt in AsyncRetrying(retry=retry_if_exception_type(Exception),
                                           wait=wait_exponential(multiplier=0.2, max=5.0)):
            with attempt:
                await self._listen(manager, attempt.retry_state)

    async def _listen(self, manager, retry_state) -> None:
        from config.redis import async_client

        pubsub = async_client(self.url).pubsub()
        try:
            await pubsub.subscribe(redis_channel())
            self.healthy = True
            retry_state.attempt_number = 1  # the next loss waits the first delay again
            self._ready.set()
            async for message in pubsub.listen():
                if message.get("type") != "message":
                    continue
                try:
                    payload = orjson.loads(message["data"])
                    manager.add_to_queues(payload["c"], Event(payload["c"], payload["t"], payload["d"]))
                except Exception:
                    logger.exception("Dropped a malformed live event")
        except asyncio.CancelledError:
            self.healthy = False
            pubsub = None  # the loop is going away; do not wait on the socket
            raise
        except Exception as exc:
            if self.healthy:
                logger.warning("Live event bridge lost Redis (%s); reconnecting", exc)
            self.healthy = False
            self._ready = asyncio.Event()
            raise
        finally:
            if pubsub is not None:
                try:
                    await asyncio.wait_for(pubsub.aclose(), 1)
                except Exception:
                    pass


_bridge: RedisBridge | None = None


async def backend_available(timeout: float = 2.0) -> bool:
    """Whether live events can reach this process now (always, in embedded mode)."""
    global _bridge
    if not settings.REDIS_URL:
        return True
    if _bridge is None:
        _bridge = RedisBridge(settings.REDIS_URL)
    _bridge.ensure_running()
    return await _bridge.wait_ready(timeout)
