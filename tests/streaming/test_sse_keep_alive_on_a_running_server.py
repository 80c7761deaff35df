"""An idle stream stays alive: on a running embedded server with no ingestion (no bar ever
comes), an open stream receives a `: keep-alive` comment every SSE_KEEPALIVE_SECONDS, and
a stream that is sent events receives none while they flow."""

import time

import httpx

from tests.integration.servers import daphne_processes, embedded_site

EVENTS = "/api/v1/streams/binance/BTC/USDT/events"


def test_an_idle_stream_receives_a_keep_alive_comment_every_keep_alive_interval(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    serving = {**env, "INGESTION_AUTOSTART": "false", "SSE_KEEPALIVE_SECONDS": "1",
               "SSE_GRANT_RECHECK_SECONDS": "0.25"}
    auth = {"Authorization": f"Bearer {key}"}
    with daphne_processes(1, env=serving) as (url,), httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                         headers=auth).status_code in (200, 201)
        with http.stream("GET", EVENTS, headers=auth, timeout=httpx.Timeout(30, read=10)) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            for line in lines:  # the opening status event: the stream is open
                if line.startswith("event: status"):
                    break
            opened = time.monotonic()
            arrivals = []
            for line in lines:
                if line == ": keep-alive":
                    arrivals.append(time.monotonic() - opened)
                    if len(arrivals) == 3:
                        break
                else:
                    assert not line.startswith("event: "), line  # nothing else on an idle stream
    gaps = [b - a for a, b in zip([0.0] + arrivals, arrivals)]
    # each after a second of silence, give or take the watcher's round (0.25 s) and scheduling
    assert all(0.7 <= gap <= 2.0 for gap in gaps), gaps
