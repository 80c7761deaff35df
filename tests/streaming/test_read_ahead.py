"""Reading a live pair ahead of its tick (PairIngestor.read_ahead): between ticks the
builder and the detectors are fed what the feed already vouches for, and the tick reads
only the rest. The bars, the scheme events and the checkpoints are those of ticks that read
each whole second themselves, on real recorded traffic and on the simulator's episodes,
also when the feed hears some events after a read ahead passed their time."""

import random
from pathlib import Path
from unittest import mock

import pytest

from market.bars import BAR_FIELDS
from schemes.models import DetectorCheckpoint, SchemeEvent
from streaming.feeds import LiveExchangeSource, PairFeed
from streaming.ingestion import ingestion_want
from streaming.ingestor import PairIngestor
from streaming.models import BookCheckpoint, IngestionState
from streaming.sources import pair_ref, source_for
from tests.second_bars import seconds_delete, stored_seconds

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "data" / "realdata" / "binance-spot" / "btcusdt_20240808.gz"
LAG_MS = 500


class ArrivedLiveSource(LiveExchangeSource):
    """A live exchange whose feed has received `events`, each when the exchange stamped it."""

    def __init__(self, ref, events):
        super().__init__("binance")
        self._feed = PairFeed(ref, LAG_MS)
        with mock.patch("streaming.feeds._wall_ms") as wall:
            for event in events:
                wall.return_value = event.ts_ms
                self._feed.sink(event)
        self._feed.live = True

    def feed(self, ref):
        return self._feed


class ArrivingLiveSource(ArrivedLiveSource):
    """A live exchange whose events reach the feed as time passes: each at its time plus
    its delay (`arrive`), in that order."""

    def __init__(self, ref, events, delays):
        super().__init__(ref, [])
        self._pending = sorted(((event.ts_ms + delays.get(index, 0), index, event)
                                for index, event in enumerate(events)), key=lambda item: item[:2])
        self._next = 0

    def arrive(self, now_ms):
        with mock.patch("streaming.feeds._wall_ms") as wall:
            while self._next < len(self._pending) and self._pending[self._next][0] <= now_ms:
                wall.return_value, _, event = self._pending[self._next]
                self._feed.sink(event)
                self._next += 1


def run(pair, events, *, read_aheads: int, seed: int = 0, delays=None):
    """Tick once a second as the ingestion loop does (a second closes LAG_MS after it ends,
    the tick 100 ms later), with `read_aheads` reads ahead at random moments between ticks.
    With `delays` ({event index: ms}) the events reach the feed as the clock passes them."""
    seconds_delete(pair)
    SchemeEvent.objects.filter(pair=pair).delete()
    DetectorCheckpoint.objects.filter(pair=pair).delete()
    BookCheckpoint.objects.filter(pair=pair).delete()
    IngestionState.objects.filter(pair=pair).update(cursor_ms=None, coverage_from_ms=None)
    ingestor = PairIngestor(pair)
    source = ArrivedLiveSource(pair_ref(pair), events) if delays is None else \
        ArrivingLiveSource(pair_ref(pair), events, delays)
    ingestor.source, ingestor.live = source, True
    arrive = getattr(source, "arrive", lambda now_ms: None)
    rng = random.Random(seed)
    first, last = events[0].ts_ms - events[0].ts_ms % 1000, events[-1].ts_ms
    ahead_of_cursor = []
    for second_end in range(first + 1000, last, 1000):
        tick_now = second_end + LAG_MS + 100
        for now in sorted(rng.randint(tick_now - 1000, tick_now) for _ in range(read_aheads)):
            arrive(now)
            ingestor.read_ahead(now)
            if ingestor.fed_ms is not None and ingestor.builder_cursor is not None:
                ahead_of_cursor.append(ingestor.fed_ms - ingestor.builder_cursor)
        arrive(tick_now)
        ingestor.step(tick_now - LAG_MS)
    bars = stored_seconds(pair)
    found = sorted(SchemeEvent.objects.filter(pair=pair).values_list("scheme", "side", "build_start_ms", "ts_ms",
                                                                      "confidence"))
    checkpoints = sorted(BookCheckpoint.objects.filter(pair=pair).values_list("cursor_ms", "state"))
    return bars, found, checkpoints, ahead_of_cursor, source.feed(None)


@pytest.fixture
def live_settings(settings):
    settings.INGESTION_LAG_MS = LAG_MS
    settings.INGESTION_BOOK_CHECKPOINT_SECONDS = 10  # checkpoints are taken between reads ahead
    settings.SCHEMES_WARMUP_MINUTES = 1
    return settings


def test_reading_a_real_recording_ahead_gives_the_bars_of_whole_second_reads(btc, live_settings):
    from market.sources.venues import binance_recording_events

    live_settings.SCHEMES_DETECTION = True
    ingestion_want(pair=btc)
    events = sorted(binance_recording_events(RECORDING, "BTCUSDT"), key=lambda e: e.ts_ms)
    snapshot = next(i for i, e in enumerate(events) if type(e).__name__ == "BookSnapshot")
    events = [e for e in events[snapshot:] if e.ts_ms < events[snapshot].ts_ms + 90_000]

    whole = run(btc, events, read_aheads=0)
    ahead = run(btc, events, read_aheads=4, seed=1)
    assert len(whole[0]) >= 85 and sum(bar[BAR_FIELDS.index("trade_count")] for bar in whole[0]) > 1000
    assert ahead[:3] == whole[:3]
    assert max(ahead[3]) > 500  # most of a second was read before its tick


def test_reading_ahead_finds_the_simulator_s_episodes_as_whole_second_reads_do(btc, live_settings):
    live_settings.SCHEMES_DETECTION = True
    live_settings.SIMULATOR_SEED = 11
    live_settings.SIMULATOR_EPISODES_PER_HOUR = 60.0
    ingestion_want(pair=btc)
    t0 = 1_763_640_000_000  # a minute boundary: the simulator's snapshot starts the book
    events = list(source_for(btc).events(pair_ref(btc), t0, t0 + 5 * 60_000))

    whole = run(btc, events, read_aheads=0)
    ahead = run(btc, events, read_aheads=6, seed=2)
    assert whole[1], "the simulator's episodes are found"
    assert ahead[:3] == whole[:3]


def test_an_event_arriving_after_a_read_ahead_passed_its_time_is_read_again_at_its_own_time(btc, live_settings):
    """The streams of a feed interleave, and a loaded process hears some frames late: an
    event a read ahead already passed, in a second not written yet, keeps its place in its
    second (the tick reads the second again from the book checkpoint), so the bars are those
    of a tick that read the whole second at once."""
    from market.sources.venues import binance_recording_events

    live_settings.SCHEMES_DETECTION = True
    ingestion_want(pair=btc)
    events = sorted(binance_recording_events(RECORDING, "BTCUSDT"), key=lambda e: e.ts_ms)
    snapshot = next(i for i, e in enumerate(events) if type(e).__name__ == "BookSnapshot")
    events = [e for e in events[snapshot:] if e.ts_ms < events[snapshot].ts_ms + 40_000]
    # early in their second, heard 850 ms late: still before the tick, after reads ahead
    delays = {i: 850 for i, e in enumerate(events) if i and 100 <= e.ts_ms % 1000 < 300 and i % 7 == 0}

    whole = run(btc, events, read_aheads=0, delays=delays)
    ahead = run(btc, events, read_aheads=6, seed=3, delays=delays)
    assert ahead[4].rereads > 0 and ahead[4].late_events == whole[4].late_events == 0
    assert ahead[:3] == whole[:3]
