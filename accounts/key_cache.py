"""The shared cache of verified keys, read on every API request.

In full mode it talks to Redis directly with compact string values: Django's cache layer
and pickling cost more than the network round trip itself (~350 µs against ~140 µs per
get, measured by bench/bench_auth.py). Embedded mode uses Django's in-process cache."""

from __future__ import annotations

from functools import lru_cache, wraps

import redis
from django.conf import settings
from django.core.cache import cache

from config import redis as process_redis


class Unavailable(Exception):
    """The shared cache cannot be reached (Redis down or not answering in time)."""


UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)


def _unavailable_when_unreachable(method):
    @wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except UNREACHABLE as exc:
            raise Unavailable(str(exc)) from exc

    return call


class _DjangoCacheStore:
    def get(self, name: str) -> str | None:
        return cache.get(name)

    def set(self, name: str, value: str, timeout: int) -> None:
        cache.set(name, value, timeout=timeout)

    def add(self, name: str, value: str, timeout: int) -> bool:
        return cache.add(name, value, timeout=timeout)

    def replace_unless(self, name: str, value: str, timeout: int, unless: str) -> None:
        if cache.get(name) != unless:
            cache.set(name, value, timeout=timeout)

    def delete(self, name: str) -> None:
        cache.delete(name)


class _RedisStore:
    # Replace the value unless it is the tombstone, atomically (a revoke always wins).
    _REPLACE_UNLESS = ("local v = redis.call('GET', KEYS[1]) "
                       "if v == ARGV[3] then return 0 end "
                       "redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1")

    def __init__(self, url: str, prefix: str):
        self._client = process_redis.client(url)  # the process's pool (config/redis.py)
        self._prefix = prefix
        self._replace_unless = self._client.register_script(self._REPLACE_UNLESS)

    @_unavailable_when_unreachable
    def get(self, name: str) -> str | None:
        value = self._client.get(self._prefix + name)
        return None if value is None else value.decode()

    @_unavailable_when_unreachable
    def set(self, name: str, value: str, timeout: int) -> None:
        self._client.set(self._prefix + name, value, ex=timeout)

    @_unavailable_when_unreachable
    def add(self, name: str, value: str, timeout: int) -> bool:
        return bool(self._client.set(self._prefix + name, value, ex=timeout, nx=True))

    @_unavailable_when_unreachable
    def replace_unless(self, name: str, value: str, timeout: int, unless: str) -> None:
        self._replace_unless(keys=[self._prefix + name], args=[value, timeout, unless])

    @_unavailable_when_unreachable
    def delete(self, name: str) -> None:
        self._client.delete(self._prefix + name)


@lru_cache(maxsize=None)
def _store_for(redis_url: str, prefix: str):
    return _RedisStore(redis_url, prefix) if redis_url else _DjangoCacheStore()


def store():
    prefix = settings.CACHES["default"].get("KEY_PREFIX", "") + ":keys:"
    return _store_for(settings.REDIS_URL, prefix)
