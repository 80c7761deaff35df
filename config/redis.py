"""The process's Redis connection pools, configured from settings: everything that talks to
Redis (Django's cache, the key cache, the live-event hub and its bridge, the health check)
takes its connections from here.

* `client()`: a `redis.Redis` on the process's one sync pool for REDIS_URL (thread-safe),
  with REDIS_SOCKET_TIMEOUT_SECONDS / REDIS_CONNECT_TIMEOUT_SECONDS: a Redis that stops
  answering fails the caller in that time instead of hanging it.
* `async_client()`: a `redis.asyncio.Redis` on the pool of the running event loop (an
  asyncio connection belongs to the loop that opened it). It has the connect timeout but
  no read timeout: its user, the pub/sub bridge, waits on the socket for as long as no
  event is published.

Forks (Celery's prefork pool, the daphne processes config/serve.py starts, multiprocessing
in tests): a sync pool made before a fork is not shared by the child. redis-py's
`ConnectionPool` remembers the pid that made it and on first use in another process drops
the inherited connections and opens its own (`ConnectionPool._checkpid`). The asyncio pools
have no such check; they are kept per process and per loop, so a child never sees its
parent's."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref

import redis
import redis.asyncio
from django.conf import settings

_lock = threading.Lock()
_sync_pools: dict[str, redis.ConnectionPool] = {}
_async_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[int, str, redis.asyncio.ConnectionPool]]" = (
    weakref.WeakKeyDictionary())


def sync_pool(url: str | None = None) -> redis.ConnectionPool:
    """The process's pool for `url` (REDIS_URL by default), made on first use."""
    url = url or settings.REDIS_URL
    pool = _sync_pools.get(url)
    if pool is None:
        with _lock:
            pool = _sync_pools.get(url)
            if pool is None:
                pool = _sync_pools[url] = redis.ConnectionPool.from_url(
                    url, socket_timeout=settings.REDIS_SOCKET_TIMEOUT_SECONDS,
                    socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT_SECONDS)
    return pool


def client(url: str | None = None) -> redis.Redis:
    """A client on the process's sync pool (bytes in, bytes out)."""
    return redis.Redis(connection_pool=sync_pool(url))


def async_client(url: str | None = None) -> redis.asyncio.Redis:
    """A client on the running loop's pool for `url` (REDIS_URL by default)."""
    url = url or settings.REDIS_URL
    loop = asyncio.get_running_loop()
    held = _async_pools.get(loop)
    if held is None or held[0] != os.getpid() or held[1] != url:
        pool = redis.asyncio.ConnectionPool.from_url(
            url, socket_connect_timeout=settings.REDIS_CONNECT_TIMEOUT_SECONDS)
        held = _async_pools[loop] = (os.getpid(), url, pool)
    return redis.asyncio.Redis(connection_pool=held[2])
