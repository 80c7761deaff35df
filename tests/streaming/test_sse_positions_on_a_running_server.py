"""Event ids are the client's whole position, on a running embedded server fed by its own
ingestion: a fresh stream starts at the pair's present (resuming from its first id replays
no scheme event from before the connect), and a scheme event replayed on resume carries
the client's bar position, so a client that drops right after it can resume again."""

import json
import time

import httpx

from tests.integration.servers import daphne_processes, embedded_site, manage

EVENTS = "/api/v1/streams/binance/BTC/USDT/events"
STORE = ("import time; from market.models import Pair; from schemes.services import scheme_events_store; "
         "pair = Pair.objects.get(exchange__slug='binance', base__symbol='BTC', quote__symbol='USDT'); "
         "now = int(time.time() * 1000) - {age_ms}; "
         "print(scheme_events_store(pair=pair, detections=[{{'scheme': 'layering', 'side': 'ask', "
         "'direction': 'down', 'ts_ms': now, 'price': 60000.0, 'confidence': 0.8, 'alert_score': 70.0, "
         "'build': {{'start_ms': now - 20000}}, 'collapse': {{}}}}])[0].pk)")


def events(http, key: str, *, last_id: str | None = None, until=lambda seen: False, seconds: float = 60):
    """(event, id, data) until `until(seen)` holds or the time is up."""
    headers = {"Authorization": f"Bearer {key}"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    seen, block, deadline = [], {}, time.monotonic() + seconds
    with http.stream("GET", EVENTS, headers=headers, timeout=httpx.Timeout(30, read=20)) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line:
                if "event" in block:
                    seen.append((block["event"], block.get("id"), json.loads(block.get("data", "null"))))
                block = {}
                if until(seen) or time.monotonic() > deadline:
                    return seen
                continue
            if not line.startswith(":"):
                name, _, value = line.partition(": ")
                block[name] = value
    return seen


def bars(seen):
    return [e for e in seen if e[0] == "bar"]


def test_a_fresh_stream_starts_at_the_present_and_replayed_scheme_events_carry_the_bar_position(tmp_path):
    env, (key,) = embedded_site(tmp_path)
    old_id = int(manage(env, "shell", "-c", STORE.format(age_ms=600_000)).splitlines()[-1])
    serving = {**env, "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "true"}
    with daphne_processes(1, env=serving) as (url,), httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/api/v1/streams", json={"exchange": "binance", "base": "BTC", "quote": "USDT"},
                         headers={"Authorization": f"Bearer {key}"}).status_code in (200, 201)
        fresh = events(http, key, until=lambda seen: len(bars(seen)) >= 1, seconds=120)
        first_id = bars(fresh)[0][1]
        bar_ts, scheme_id = (int(part) for part in first_id.split("."))
        assert scheme_id == old_id  # the present, not 0
        assert not [e for e in fresh if e[0] == "scheme-event"]

        resumed = events(http, key, last_id=first_id, until=lambda seen: len(bars(seen)) >= 2)
        assert not [e for e in resumed if e[0] in ("scheme-event", "stream-reset")]  # nothing from before
        assert all(int(e[1].split(".")[0]) > bar_ts for e in bars(resumed))

        last_id = bars(resumed)[-1][1]
        new_id = int(manage(env, "shell", "-c", STORE.format(age_ms=0)).splitlines()[-1])
        again = events(http, key, last_id=last_id,
                       until=lambda seen: any(e[0] == "scheme-event" for e in seen) and len(bars(seen)) >= 1)
        replayed = [e for e in again if e[0] == "scheme-event"]
        assert [e[2]["id"] for e in replayed] == [new_id]
        position = replayed[0][1]
        assert int(position.split(".")[0]) >= int(last_id.split(".")[0]) > 0 and position.endswith(f".{new_id}")
        # dropping right after it and resuming from its id works: no reset, no repeat
        after = events(http, key, last_id=position, until=lambda seen: len(bars(seen)) >= 1)
        assert not [e for e in after if e[0] in ("stream-reset", "scheme-event")]
