"""Scheme detection inside ingestion: a worker restart neither loses nor repeats events."""

from unittest import mock

import pytest

from schemes.models import DetectorCheckpoint, SchemeEvent
from streaming.ingestion import ingestion_want
from streaming.ingestor import PairIngestor
from streaming.models import IngestionState

T0 = 1_763_640_000_000  # a minute boundary
END = T0 + 8 * 60_000


@pytest.fixture
def detecting(btc, settings):
    settings.SCHEMES_DETECTION = True
    settings.SCHEMES_WARMUP_MINUTES = 3
    settings.INGESTION_BOOK_CHECKPOINT_SECONDS = 10  # the detectors are checkpointed with the book
    settings.INGESTION_MAX_WINDOW_MS = 60_000
    settings.SIMULATOR_SEED = 11  # a source of its own, with an episode a minute
    settings.SIMULATOR_EPISODES_PER_HOUR = 60.0
    ingestion_want(pair=btc)
    return btc


def start_at_t0(pair):
    SchemeEvent.objects.filter(pair=pair).delete()
    DetectorCheckpoint.objects.filter(pair=pair).delete()
    IngestionState.objects.filter(pair=pair).update(cursor_ms=T0, coverage_from_ms=T0)


def stored_events(pair):
    return sorted(SchemeEvent.objects.filter(pair=pair).values_list("scheme", "side", "build_start_ms", "ts_ms",
                                                                    "confidence"))


def run_steps(ingestor, start, end, step_ms=7_000):
    t = start
    while t < end:
        t = min(end, t + step_ms)
        ingestor.step(t)


def published_during(fn):
    with mock.patch("schemes.services._publish") as publish:
        fn()
    return [(row.scheme, row.side, row.build_start_ms) for call in publish.call_args_list for row in call.args[1]]


def test_an_uninterrupted_run_detects_and_checkpoints(detecting):
    start_at_t0(detecting)
    run_steps(PairIngestor(detecting), T0, END)
    assert stored_events(detecting), "the simulated episodes should be detected"
    checkpoint = DetectorCheckpoint.objects.get(pair=detecting)
    assert END - 20_000 <= checkpoint.cursor_ms <= END  # every 10 s at a second of the pair's own


def test_a_worker_killed_mid_step_neither_loses_nor_repeats_scheme_events(detecting):
    start_at_t0(detecting)
    reference_published = published_during(lambda: run_steps(PairIngestor(detecting), T0, END))
    reference = stored_events(detecting)

    start_at_t0(detecting)
    first = PairIngestor(detecting)

    def until_the_crash():
        run_steps(first, T0, T0 + 238_000)
        if DetectorCheckpoint.objects.get(pair=detecting).cursor_ms == T0 + 238_000:
            first.step(T0 + 245_000)  # the replay must have work to do: past the last checkpoint
        with mock.patch("streaming.ingestor.bars_write_many", side_effect=RuntimeError("worker killed")):
            with pytest.raises(RuntimeError):
                first.step(T0 + 270_000)

    published = published_during(until_the_crash)
    cursor = IngestionState.objects.get(pair=detecting).cursor_ms
    assert DetectorCheckpoint.objects.get(pair=detecting).cursor_ms < cursor  # the replay has work to do
    published += published_during(lambda: run_steps(PairIngestor(detecting), cursor, END))  # another worker

    assert stored_events(detecting) == reference
    assert sorted(published) == sorted(reference_published)  # each event told to the live feed once
    assert len(set(published)) == len(published)


def test_a_checkpoint_from_another_engine_version_falls_back_to_a_warm_up(detecting):
    start_at_t0(detecting)
    run_steps(PairIngestor(detecting), T0, T0 + 60_000)
    DetectorCheckpoint.objects.filter(pair=detecting).update(state=b"not a pickle")
    run_steps(PairIngestor(detecting), T0 + 60_000, T0 + 90_000)  # no error: warmed up instead
    assert IngestionState.objects.get(pair=detecting).cursor_ms == T0 + 90_000
