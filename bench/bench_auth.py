"""API key authentication: the warm path (cache hit) against the cold path (argon2).

    python bench/bench_auth.py            # in-process cache
    REDIS_URL=redis://127.0.0.1:6379/0 python bench/bench_auth.py
"""

from __future__ import annotations

import statistics
import time
from unittest import mock

if __package__ in (None, ""):
    import django_env
else:
    from . import django_env

GOAL_WARM_MS = 0.2


def run() -> list[dict]:
    django_env.setup()
    from django.conf import settings
    from django.test import RequestFactory

    from accounts.authentication import ApiKeyAuthentication
    from accounts import key_cache
    from accounts.services import account_upsert, api_key_create
    from accounts.verification import key_cache_name
    from billing.services import plans_seed_defaults

    plans = {p.name: p for p in plans_seed_defaults()}
    account = account_upsert(email=f"bench{time.time_ns()}@example.com", plan=plans["pro"]).account
    created = api_key_create(account=account, name="bench")
    lookup = created.api_key.lookup_id
    request = RequestFactory().get("/api/v1/me/usage",
                                   HTTP_AUTHORIZATION=f"Bearer {created.plaintext}")
    authenticator = ApiKeyAuthentication()

    import argon2

    real_verify = argon2.PasswordHasher.verify
    calls = {"n": 0}

    def counting_verify(self, hash_, password):
        calls["n"] += 1
        return real_verify(self, hash_, password)

    with mock.patch.object(argon2.PasswordHasher, "verify", counting_verify):
        cold = []
        for _ in range(3):
            key_cache.store().delete(key_cache_name(lookup))
            started = time.perf_counter()
            authenticator.authenticate(request)
            cold.append((time.perf_counter() - started) * 1000)
        cold_calls = calls["n"]
        authenticator.authenticate(request)  # warm the cache
        calls["n"] = 0
        rounds, per_round = 7, 5000
        warm = []
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(per_round):
                authenticator.authenticate(request)
            warm.append((time.perf_counter() - started) * 1000 / per_round)
        warm_calls = calls["n"]

    cache_kind = "Redis" if settings.REDIS_URL else "in-process"
    warm_ms = statistics.median(warm)
    return [
        {"figure": f"auth warm path per request ({cache_kind} cache)",
         "value": f"{warm_ms * 1000:.1f} µs", "comparison": f"cold (argon2id) {statistics.median(cold):.0f} ms",
         "goal": f"< {GOAL_WARM_MS} ms", "met": warm_ms < GOAL_WARM_MS},
        {"figure": "argon2 verifications",
         "value": f"{warm_calls} in {rounds * per_round} warm requests",
         "comparison": f"{cold_calls} in 3 cold requests", "goal": "only on a cold key",
         "met": warm_calls == 0 and cold_calls == 3},
    ]


if __name__ == "__main__":
    print("| figure | ours | comparison | goal |\n|---|---|---|---|")
    for row in run():
        print(f"| {row['figure']} | {row['value']} | {row['comparison']} | {row['goal']} |")
