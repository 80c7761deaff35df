"""The Python client's live feed across a server killed with SIGKILL and started again on
the same database: the iterator reconnects by itself, resumes with the last id it saw,
and what it yields has every second bar once, without a gap, across the restart."""

import threading
import time

import pytest

from marketdata import Client
from tests.api.demo_site import demo_environment
from tests.clients.servers import restartable_server
from tests.integration.servers import free_port

# pytest-django makes the test database only for tests that ask for it where it can see
# it (a mark or a fixture argument, not getfixturevalue); in full mode the servers use it.
pytestmark = pytest.mark.django_db(transaction=True)
PAIR = "binance/BTC/USDT"  # one of the demo account's paid streams


@pytest.fixture
def ingesting_server(tmp_path):
    """A demo server whose own ingestion feeds the live stream (the embedded way, in both
    modes), with leases short enough for a restarted process to take the pair back at once."""
    env, key = demo_environment(tmp_path)
    serving = {**env, "INGESTION_AUTOSTART": "true", "INGESTION_IN_PROCESS": "true", "INGESTION_LEASE_SECONDS": "2",
               "INGESTION_BACKFILL_HOURS": "1"}
    with restartable_server(free_port(), serving) as server:
        yield server, key


class Reader(threading.Thread):
    """Iterates the client's feed, keeping the bars, until told to stop."""

    def __init__(self, client: Client):
        super().__init__(daemon=True)
        self.feed = client.live(PAIR, backoff=(0.1, 0.5), give_up_after=60)
        self.bars, self.stop, self.error = [], threading.Event(), None

    def run(self):
        try:
            for event in self.feed:
                if event.event == "bar":
                    self.bars.append((event.id, event.data["ts_ms"]))
                if self.stop.is_set():
                    return
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            self.feed.close()

    def wait_for(self, count: int, within: float) -> None:
        deadline = time.monotonic() + within
        while len(self.bars) < count:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, f"{len(self.bars)} bars after {within} s, wanted {count}"
            time.sleep(0.1)


def test_the_feed_iterator_loses_nothing_and_repeats_nothing_across_a_killed_and_restarted_server(ingesting_server):
    server, key = ingesting_server
    with Client(key, server.url, timeout=10) as client:
        reader = Reader(client)
        reader.start()
        reader.wait_for(3, within=40)
        server.kill()
        before = len(reader.bars)
        time.sleep(1.5)  # down for a while: the seconds of the outage are caught up after the restart
        server.start()
        reader.wait_for(before + 4, within=40)
        reader.stop.set()
        reader.join(10)
    assert reader.error is None, reader.error
    seconds = [ts for _, ts in reader.bars]
    assert seconds == list(range(seconds[0], seconds[0] + 1000 * len(seconds), 1000)), seconds  # no gap, no repeat
    assert [int(float(event_id)) for event_id, _ in reader.bars] == seconds  # each bar's id is its position
    assert reader.feed.reconnects >= 1
    # the outage's own seconds came too: the bars span more than the time the reader was connected
    assert seconds[before] - seconds[before - 1] == 1000
