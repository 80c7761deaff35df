"""Lookup + insert cost of the process caches against cachetools, in one process (timeit).

    python bench/bench_process_caches.py

config.recent.RecentLookups (the counted-request hot path: account, catalog, pair status)
against cachetools.TTLCache / TLRUCache; the clear-when-full dicts of accounts.verification and
billing.metering against cachetools.TTLCache / LRUCache. Figures are ns per operation, best
of 5 repeats, hits on a cache of 1,000 keys."""

from __future__ import annotations

import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from django_env import setup_without_database  # noqa: E402

setup_without_database()

import cachetools  # noqa: E402
from django.conf import settings  # noqa: E402

from config.recent import RecentLookups  # noqa: E402

N = 200_000
KEYS = [(i, "binance") for i in range(1000)]


def best(stmt, number=N) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number * 1e9


def main() -> None:
    settings.BENCH_SECONDS = 60
    ours = RecentLookups("BENCH_SECONDS")
    ttl = cachetools.TTLCache(maxsize=100_000, ttl=60, timer=time.monotonic)
    tlru = cachetools.TLRUCache(maxsize=100_000, ttu=lambda k, v, now: now + settings.BENCH_SECONDS,
                                timer=time.monotonic)
    for key in KEYS:
        ours.put(key, "v")
        ttl[key] = "v"
        tlru[key] = "v"
    load = lambda: "v"  # noqa: E731
    key = KEYS[500]
    rows = {
        "RecentLookups.get (hit)": best(lambda: ours.get(key, load)),
        "RecentLookups.fresh (hit)": best(lambda: ours.fresh(key)),
        "RecentLookups.put": best(lambda: ours.put(key, "v")),
        "TTLCache.get (hit)": best(lambda: ttl.get(key)),
        "TTLCache[key] = v": best(lambda: ttl.__setitem__(key, "v")),
        "TLRUCache.get (hit)": best(lambda: tlru.get(key)),
        "TLRUCache[key] = v": best(lambda: tlru.__setitem__(key, "v")),
    }
    plain: dict = {k: "v" for k in KEYS}
    lru = cachetools.LRUCache(maxsize=10_000)
    for k in KEYS:
        lru[k] = "v"

    def dict_insert():
        if len(plain) >= 100_000:
            plain.clear()
        plain[key] = "v"

    rows.update({
        "dict.get (hit) [accounts/billing]": best(lambda: plain.get(key)),
        "dict insert, clear when full": best(dict_insert),
        "LRUCache.get (hit)": best(lambda: lru.get(key)),
        "LRUCache[key] = v": best(lambda: lru.__setitem__(key, "v")),
    })
    base = best(lambda: None)
    print(f"(empty lambda call {base:.0f} ns, included below)")
    for name, ns in rows.items():
        print(f"{name:38s} {ns:7.0f} ns")


if __name__ == "__main__":
    main()
