"""Django's Redis cache on the process's one connection pool (config/redis.py).

Django keeps a cache backend per async context (`asgiref.local.Local`), and under ASGI
every request is a context of its own: each request built a new `RedisCacheClient`, a new
connection pool and a new TCP connection to Redis, ~1.9 ms of server CPU for one
`cache.get` (Django tickets 33625 and 35651). Here every backend instance takes its
connections from the pool of config/redis.py, shared with the key cache and the live-event
hub, with the timeouts of the settings."""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

from . import redis as process_redis


class ProcessPoolCacheClient(RedisCacheClient):
    def _get_connection_pool(self, write):
        return process_redis.sync_pool(self._servers[self._get_connection_pool_index(write)])


class ProcessRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ProcessPoolCacheClient
