"""A stream dropped and resumed is the uninterrupted stream, event for event: on a running
embedded server whose own ingestion and detection feed it, one client stays connected
while another drops its connection right after a bar and right after a scheme event,
stays away long enough to miss live events, and resumes with the last id it saw. What the
resumed client received equals what the connected one received over the same span: the
same events, in the same order, with the same ids and data."""

import json
import threading
import time

import httpx
import pytest

from tests.integration.servers import daphne_processes, embedded_site

pytestmark = pytest.mark.slow

EVENTS = "/api/v1/streams/binance/BTC/USDT/events"
POSITIONED = ("bar", "scheme-event")  # the events that carry an id
OFFLINE_SECONDS = 2.5  # long enough for live bars to be published while the client is away


def stream_events(http, key: str, last_id: str | None = None):
    """Yield (event, id, data) of one connection; closing the generator drops it."""
    headers = {"Authorization": f"Bearer {key}"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    with http.stream("GET", EVENTS, headers=headers, timeout=httpx.Timeout(30, read=30)) as response:
        assert response.status_code == 200, response.read()
        block = {}
        for line in response.iter_lines():
            if line:
                if not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    block[name] = value
                continue
            if "event" in block:
                yield block["event"], block.get("id"), json.loads(block.get("data", "null"))
            block = {}


class Uninterrupted(threading.Thread):
    def __init__(self, http, key):
        super().__init__(daemon=True)
        self.http, self.key, self.seen, self.stop = http, key, [], threading.Event()

    def run(self):
        try:
            for event in stream_events(self.http, self.key):
                if event[0] in POSITIONED:
                    self.seen.append(event)
                if self.stop.is_set():
                    return
        except httpx.HTTPError:  # the server stopped
            return


def test_a_stream_dropped_after_a_bar_and_after_a_scheme_event_resumes_exactly_as_if_uninterrupted(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    serving = {**env, "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "true", "SCHEMES_DETECTION": "true",
               "SIMULATOR_EPISODES_PER_HOUR": "60"}
    with daphne_processes(1, env=serving) as (url,), httpx.Client(base_url=url, timeout=30) as http:
        subscribed = http.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                               headers={"Authorization": f"Bearer {key}"})
        assert subscribed.status_code in (200, 201), subscribed.text
        connected = Uninterrupted(http, key)
        connected.start()
        while not connected.seen:  # the resuming client starts after the connected one
            time.sleep(0.2)

        received, drops, last_id = [], {"bar": 0, "scheme-event": 0}, None
        deadline = time.monotonic() + 420
        while (drops["scheme-event"] < 1 or drops["bar"] < 3) and time.monotonic() < deadline:
            bars_this_time = 0
            connection = stream_events(http, key, last_id)
            for event in connection:
                if event[0] not in POSITIONED:
                    continue
                received.append(event)
                last_id = event[1]
                if event[0] == "scheme-event":
                    break  # drop right after a scheme event
                bars_this_time += 1
                if bars_this_time == 4:
                    break  # drop right after a bar
            connection.close()
            drops[received[-1][0]] += 1
            time.sleep(OFFLINE_SECONDS)
        assert drops["scheme-event"] >= 1, f"no scheme event came in 7 minutes ({drops})"

        # the connected client has passed the resumed one's last event
        while connected.seen[-1][1].split(".")[0] <= last_id.split(".")[0] and time.monotonic() < deadline + 30:
            time.sleep(0.2)
        connected.stop.set()

    seen = list(connected.seen)
    first = [n for n, event in enumerate(seen) if event[1] == received[0][1]]
    assert first, f"{received[0]} not among {[e[1] for e in seen][:40]}"
    start = first[0]
    assert received == seen[start:start + len(received)]
    kinds = {event[0] for event in received}
    assert kinds == {"bar", "scheme-event"} and len({event[1] for event in received}) == len(received)
