"""Ingestion steps: bars and cursor commit together; a crash loses and repeats nothing."""

from unittest import mock

import pytest

from config import clock
from market.bars import MINUTE_MS, floor_ms
from market.models import MinuteBar
from market.sources.bar_builder import BarBuilder
from market.sources.simulator import SimulatorSource
from streaming import ingestion
from streaming.ingestion import ingestion_want
from streaming.ingestor import LeaseLost, PairIngestor
from streaming.leases import leases_acquire
from streaming.models import IngestionState
from streaming.sources import pair_ref
from tests.second_bars import stored_seconds

T0 = 1_763_640_000_000  # a minute boundary


@pytest.fixture
def state(btc, settings):
    settings.INGESTION_MAX_WINDOW_MS = 60_000
    ingestion_want(pair=btc)
    IngestionState.objects.filter(pair=btc).update(cursor_ms=T0, coverage_from_ms=T0)
    return IngestionState.objects.get(pair=btc)


def reference_bars(pair, start, end):
    source = SimulatorSource(seed=0, episodes_per_hour=4.0)
    ref = pair_ref(pair)
    builder = BarBuilder(ref)
    warm = floor_ms(start, "minute")
    for event in source.events(ref, warm, start):
        builder.feed(event)
    builder.flush(start)
    for event in source.events(ref, start, end):
        builder.feed(event)
    return builder.flush(end)


def stored(pair):
    return stored_seconds(pair, columns=("ts_ms", "trade_count", "close", "bid_amount_sum"))


def test_a_step_writes_second_bars_and_moves_the_cursor(btc, state):
    result = PairIngestor(btc).step(T0 + 30_000)
    assert result.cursor_ms == T0 + 30_000 and len(result.bars) == 30
    assert IngestionState.objects.get(pair=btc).cursor_ms == T0 + 30_000
    assert len(stored(btc)) == 30
    assert MinuteBar.objects.filter(pair=btc).count() == 1


def test_steps_in_any_split_equal_one_pass(btc, state):
    ingestor = PairIngestor(btc)
    for until in (T0 + 7_000, T0 + 61_000, T0 + 61_000, T0 + 95_000, T0 + 150_000):
        ingestor.step(until)
    expected = [(b.ts_ms, b.trade_count, b.close, b.bid_amount_sum) for b in reference_bars(btc, T0, T0 + 150_000)]
    assert stored(btc) == expected


def test_a_crash_mid_step_loses_and_repeats_nothing(btc, state):
    ingestor = PairIngestor(btc)
    ingestor.step(T0 + 20_000)
    with mock.patch("streaming.ingestor.bars_write_many", side_effect=RuntimeError("worker killed")):
        with pytest.raises(RuntimeError):
            ingestor.step(T0 + 50_000)
    assert IngestionState.objects.get(pair=btc).cursor_ms == T0 + 20_000
    fresh = PairIngestor(btc)  # another worker picks the pair up
    fresh.step(T0 + 50_000)
    ingestor.step(T0 + 90_000)  # the old one must notice the cursor moved and rebuild
    expected = [(b.ts_ms, b.trade_count, b.close, b.bid_amount_sum) for b in reference_bars(btc, T0, T0 + 90_000)]
    assert stored(btc) == expected


def test_a_worker_that_lost_its_lease_writes_nothing(btc, state):
    leases_acquire(owner="A", pair_ids=[btc.pk])
    with pytest.raises(LeaseLost):
        PairIngestor(btc, owner="B").step(T0 + 10_000)
    assert stored(btc) == []


def test_a_lease_is_exclusive_until_it_expires(btc, state):
    from datetime import timedelta

    from django.utils import timezone

    assert leases_acquire(owner="A", pair_ids=[btc.pk]) == [btc.pk]
    assert leases_acquire(owner="B", pair_ids=[btc.pk]) == []
    IngestionState.objects.filter(pair=btc).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert leases_acquire(owner="B", pair_ids=[btc.pk]) == [btc.pk]


def test_first_step_backfills_24_hours(btc, settings):
    ingestion_want(pair=btc)
    result = PairIngestor(btc).step(clock.now_ms())
    state = IngestionState.objects.get(pair=btc)
    assert state.coverage_from_ms <= clock.now_ms() - 24 * 3_600_000 + MINUTE_MS
    from streaming.selectors import coverage_24h

    assert coverage_24h(pair=btc, now=clock.now_ms()) > 0.95
    assert result is not None and result.bars


def test_many_pairs_status_signals_are_read_in_two_statements_and_match_each_pairs_own(
        catalog, django_assert_num_queries, monkeypatch):
    """The ingestion loop announces its pairs' states from one read of all their signals;
    what it reads for each pair is what that pair's own status read gives."""
    from streaming.selectors import pair_status, pairs_signals

    heard = [catalog["binance/BTC/USDT"], catalog["binance/ETH/USDT"]]
    for pair in heard:
        ingestion_want(pair=pair)
        PairIngestor(pair).step(clock.now_ms())
    wanted_only = catalog["binance/SOL/USDT"]
    ingestion_want(pair=wanted_only)
    pairs = [*heard, wanted_only, catalog["coinbase/BTC/USD"]]
    now = clock.now_ms()
    monkeypatch.setattr(clock, "now_ms", lambda: now)  # the heartbeat's age is the same in both reads
    with django_assert_num_queries(2):
        signals = pairs_signals(pairs=pairs, now=now)
    assert [coverage > 0.95 for _state, coverage in (signals[p.pk] for p in heard)] == [True, True]
    assert signals[wanted_only.pk][1] == 0.0 and signals[pairs[-1].pk] == (None, 0.0)
    for pair in pairs:
        assert pair_status(pair=pair, account=None, subscribed=None, signals=signals[pair.pk]) == \
            pair_status(pair=pair, account=None, subscribed=None)


def test_unwanted_pairs_retire_after_the_grace_period(btc, state, settings):
    from streaming.ingestion import ingestion_unwant
    from streaming.leases import retire_unwanted, wanted_pair_ids

    ingestion_unwant(pair=btc)
    assert btc.pk in wanted_pair_ids()
    settings.INGESTION_GRACE_SECONDS = 0
    assert retire_unwanted() == 1
    assert btc.pk not in wanted_pair_ids()


def test_bars_are_published_live_after_their_commit(btc, state, django_capture_on_commit_callbacks, monkeypatch):
    from streaming import live

    seen = []
    monkeypatch.setattr(live, "publish_bars_many", lambda items: seen.extend(len(bars) for _, bars in items))
    with django_capture_on_commit_callbacks(execute=True):
        PairIngestor(btc).step(T0 + 5_000)
        assert seen == []
    assert seen == [5]



def test_a_command_that_subscribes_leaves_ingestion_to_the_server(db, settings, btc, account,
                                                                  django_capture_on_commit_callbacks):
    """seed_demo used to start the embedded ingestion thread in its own process: it took the
    leases, died with the command, and a fresh `make run` served nothing until they lapsed."""
    from streaming.ingestion import EmbeddedIngestion
    from streaming.services import subscription_upsert

    settings.INGESTION_IN_PROCESS = settings.INGESTION_AUTOSTART = True
    with mock.patch.object(EmbeddedIngestion, "ensure_started") as started, \
            mock.patch.object(EmbeddedIngestion, "serving", False):
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            subscription_upsert(account=account, pair=btc, metrics=["trade"])
        assert callbacks  # the kick ran
        started.assert_not_called()
        assert IngestionState.objects.get(pair=btc).lease_owner == ""
    with mock.patch.object(EmbeddedIngestion, "ensure_started") as started, \
            mock.patch.object(EmbeddedIngestion, "serving", True):
        ingestion._kick(btc.pk)
        started.assert_called_once()
