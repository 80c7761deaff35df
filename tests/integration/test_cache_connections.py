"""A server process keeps its Redis connections across requests: Django's cache built a
new client, pool and TCP connection for every request under ASGI (config/cache.py)."""

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection

from .servers import daphne_processes, database_url_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

REQUESTS = 60


def connections_received() -> int:
    return redis.Redis.from_url(settings.REDIS_URL).info("stats")["total_connections_received"]


def test_requests_that_use_the_cache_reuse_the_processs_redis_connections():
    env = {"DATABASE_URL": database_url_for(connection.settings_dict), "REDIS_URL": settings.REDIS_URL}
    with daphne_processes(1, env=env) as (base,):
        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.get("/healthz").status_code == 200  # writes and reads the cache
            before = connections_received()
            for _ in range(REQUESTS):
                assert http.get("/healthz").status_code == 200
            opened = connections_received() - before
    # one per request before; a few now (the health check's own clients, concurrent tests)
    assert opened < REQUESTS // 4
