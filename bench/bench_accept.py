"""config.api.media.read_accept against Django 5.2's HttpRequest.get_preferred_type, on the
negotiation tests' Accept headers (same answers?) and in time per request (timeit).

    python bench/bench_accept.py"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from django_env import setup_without_database  # noqa: E402

setup_without_database()

from django.test import RequestFactory  # noqa: E402

from config.api.media import read_accept  # noqa: E402

TYPES = ["application/json", "application/toon", "text/toon"]
# tests/api/test_media.py: (header, served format; None = 415)
CASES = [("", "json"), ("*/*", "json"), ("application/json", "json"), ("application/toon", "toon"),
         ("text/toon", "toon"), ("application/*", "json"), ("application/toon, application/json", "toon"),
         ("application/json, application/toon", "toon"), ("application/json;q=1, application/toon;q=0.5", "json"),
         ("application/json;q=0.5, application/toon;q=0.9", "toon"), ("text/html, */*;q=0.8", "json"),
         ("APPLICATION/TOON", "toon"), ("text/html", None), ("image/png, text/csv", None),
         ("application/json;q=0", None), ("application/json;q=abc", None)]
factory = RequestFactory()


def django_choice(header: str) -> str | None:
    request = factory.get("/", HTTP_ACCEPT=header) if header else factory.get("/")
    chosen = request.get_preferred_type(TYPES)
    return None if chosen is None else ("json" if chosen == "application/json" else "toon")


def ours(header: str) -> str | None:
    verdict = read_accept(header)
    return None if not verdict.acceptable else ("toon" if verdict.prefers_toon else "json")


def main() -> None:
    differ = 0
    for header, expected in CASES:
        got_django, got_ours = django_choice(header), ours(header)
        if got_django != expected or got_ours != expected:
            differ += got_django != expected
            print(f"{header!r:50s} expected {expected}, ours {got_ours}, Django {got_django}")
    print(f"Django differs on {differ} of {len(CASES)} cases")
    header = "text/html, application/json;q=0.9, */*;q=0.8"
    requests = [factory.get("/", HTTP_ACCEPT=header) for _ in range(200_000)]
    it = iter(requests)
    n = 100_000
    t_ours = min(timeit.repeat(lambda: read_accept(header), number=n, repeat=5)) / n * 1e9
    # a fresh request each time: accepted_types is cached per request
    t_django = timeit.timeit(lambda: next(it).get_preferred_type(TYPES), number=n) / n * 1e9
    print(f"read_accept: {t_ours:.0f} ns; HttpRequest.get_preferred_type: {t_django:.0f} ns ({header!r})")


if __name__ == "__main__":
    main()
