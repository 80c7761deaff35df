"""The processes share the wanted pairs evenly through the leases: each holds its fair share,
a joining process gets pairs handed over at a commit, a process that left or died loses its
pairs to the others, and across every move each second is stored once."""

from datetime import timedelta
from unittest import mock

import pytest
from django.conf import settings

from config import clock
from market.models import Pair
from market.services import bars_write_many
from streaming import ingestion, leases
from streaming.ingestion import ingestion_want
from streaming.ingestor import PairIngestor, TickOutcome, ingest_tick
from streaming.leases import fair_share, handovers_prepare, leases_claim, worker_heartbeat, worker_leave
from streaming.models import IngestionState, IngestionWorker
from tests.second_bars import stored_seconds
from tests.integration.workers import assert_second_bars_are_the_simulators

pytestmark = pytest.mark.heavy

T0 = 1_763_640_000_000  # a minute boundary


@pytest.fixture
def pairs(catalog, settings):
    settings.INGESTION_MAX_WINDOW_MS = 60_000
    wanted = sorted(catalog.values(), key=lambda pair: pair.pk)[:12]
    for pair in wanted:
        ingestion_want(pair=pair)
    IngestionState.objects.update(cursor_ms=T0, coverage_from_ms=T0)
    return wanted


def owners() -> dict[str, int]:
    counts: dict[str, int] = {}
    for owner in IngestionState.objects.exclude(lease_owner="").values_list("lease_owner", flat=True):
        counts[owner] = counts.get(owner, 0) + 1
    return counts


def claim(owner: str) -> list[int]:
    return leases_claim(owner=owner, alive=worker_heartbeat(owner=owner), wanted=leases.wanted_pair_ids())


def tick(owner: str, ingestors: dict[int, PairIngestor], until_ms: int) -> TickOutcome:
    owned = claim(owner)
    for pair_id in owned:
        ingestors.setdefault(pair_id, PairIngestor(Pair.objects.get(pk=pair_id), owner))
    outcome = ingest_tick([ingestors[p] for p in owned], until_ms, alive=worker_heartbeat(owner=owner))
    for pair_id in outcome.lost | outcome.handed_over:
        ingestors.pop(pair_id, None)
    return outcome


def test_the_fair_share_is_the_pairs_divided_by_the_processes_rounded_up():
    assert [fair_share(100, n) for n in (1, 2, 3, 7)] == [100, 50, 34, 15]
    assert fair_share(0, 3) == 0 and fair_share(5, 0) == 5


def test_two_processes_split_the_wanted_pairs_evenly(pairs):
    worker_heartbeat(owner="A"), worker_heartbeat(owner="B")
    assert len(claim("A")) == 6 and len(claim("B")) == 6
    assert owners() == {"A": 6, "B": 6}
    assert len(claim("A")) == 6  # renewing takes no more


def test_a_joining_process_has_its_share_handed_over_at_a_commit_and_no_second_is_lost_or_doubled(pairs):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 5_000)
    assert owners() == {"A": 12}
    worker_heartbeat(owner="B")
    assert claim("B") == []  # nothing free: it asks A, above its share now, for six
    asked = set(IngestionState.objects.filter(handover_to="B").values_list("pair_id", flat=True))
    assert len(asked) == 6
    handovers_prepare(owner="B", pairs={})  # a simulated source replays its past: ready at once
    outcome = tick("A", a, T0 + 9_000)  # A's commit moves the leases with its cursor
    assert outcome.handed_over == asked and owners() == {"A": 6, "B": 6}
    b: dict[int, PairIngestor] = {}
    tick("B", b, T0 + 14_000), tick("A", a, T0 + 14_000)
    assert set(b) == asked and not set(a) & asked
    for pair in pairs:
        assert_second_bars_are_the_simulators(pair, T0, T0 + 14_000, str(pair))


def test_the_pairs_of_a_process_that_left_are_taken_by_the_others(pairs):
    worker_heartbeat(owner="A"), worker_heartbeat(owner="B")
    claim("A"), claim("B")
    worker_leave(owner="B")
    assert not IngestionWorker.objects.filter(owner="B").exists()
    assert len(claim("A")) == 12


def test_the_pairs_of_a_process_that_died_are_taken_once_its_leases_lapse(pairs, settings):
    worker_heartbeat(owner="A"), worker_heartbeat(owner="B")
    claim("A"), claim("B")
    assert len(claim("A")) == 6  # B's leases still run
    lapsed = clock.utcnow() - timedelta(seconds=settings.INGESTION_LEASE_SECONDS + 1)
    IngestionWorker.objects.filter(owner="B").update(seen_at=lapsed)
    IngestionState.objects.filter(lease_owner="B").update(lease_until=lapsed)
    assert len(claim("A")) == 12


def test_a_handover_to_a_process_that_is_gone_is_withdrawn(pairs):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 3_000)
    worker_heartbeat(owner="B"), claim("B")
    assert IngestionState.objects.filter(handover_to="B").count() == 6
    worker_leave(owner="B")
    assert IngestionState.objects.filter(handover_to="B").count() == 0
    tick("A", a, T0 + 6_000)
    assert owners() == {"A": 12}


def test_a_live_pair_is_handed_over_only_once_the_takers_feed_is_complete(pairs):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 3_000)
    worker_heartbeat(owner="B"), claim("B")
    live_source = mock.Mock(live=True)
    live_source.complete_from_ms.return_value = None  # not synced yet
    with mock.patch.object(leases, "source_for", return_value=live_source):
        handovers_prepare(owner="B", pairs={})
    assert IngestionState.objects.filter(handover_to="B", handover_ready_ms__isnull=True).count() == 6
    assert tick("A", a, T0 + 6_000).handed_over == set()
    live_source.complete_from_ms.return_value = T0 + 8_000
    with mock.patch.object(leases, "source_for", return_value=live_source):
        handovers_prepare(owner="B", pairs={})
    assert tick("A", a, T0 + 7_000).handed_over == set()  # A's cursor is not there yet
    assert len(tick("A", a, T0 + 8_000).handed_over) == 6


def test_a_tick_that_fails_to_write_is_retried_pair_by_pair_so_one_bad_pair_costs_only_itself(pairs):
    bad = pairs[0]
    write = bars_write_many

    def failing(*, granularity, bars_by_pair, **options):
        if any(pair.pk == bad.pk for pair, _ in bars_by_pair):
            raise RuntimeError("a bar the database refuses")
        return write(granularity=granularity, bars_by_pair=bars_by_pair, **options)

    a: dict[int, PairIngestor] = {}
    with mock.patch("streaming.ingestor.bars_write_many", side_effect=failing):
        outcome = tick("A", a, T0 + 4_000)
    assert set(outcome.failed) == {bad.pk}
    assert len(outcome.results) == 11
    assert stored_seconds(bad) == []
    assert IngestionState.objects.get(pair=bad).cursor_ms == T0
    outcome = tick("A", a, T0 + 6_000)  # the pair catches up once its write succeeds
    assert not outcome.failed
    for pair in pairs:
        assert_second_bars_are_the_simulators(pair, T0, T0 + 6_000, str(pair))


def test_ticks_fire_just_after_a_second_becomes_closable_and_at_once_when_behind(settings, monkeypatch):
    settings.INGESTION_LAG_MS = 1000
    monkeypatch.setattr(ingestion.time, "time", lambda: 1_000_000.350)
    assert ingestion._until_next_tick(1.0, 0.2) == pytest.approx(0.75)  # at .100: 1 s lag + 100 ms
    assert ingestion._until_next_tick(1.0, 1.3) == 0.05


def test_staff_see_the_running_ingestion_processes_and_the_pairs_each_holds(pairs, admin_client):
    worker_heartbeat(owner="A"), claim("A")
    page = admin_client.get("/admin/streaming/ingestionworker/")
    assert page.status_code == 200
    assert b"A" in page.content and b"<td class=\"field-pairs_held\">12</td>" in page.content


def test_pairs_checkpoint_once_a_period_each_at_a_second_of_its_own(pairs, settings):
    settings.INGESTION_BOOK_CHECKPOINT_SECONDS = 60
    due_at = {}
    for pair in pairs:
        ingestor = PairIngestor(pair)
        ingestor.checkpoint_ms = T0
        seconds = [s for s in range(1, 121) if ingestor._checkpoint_due(T0 + s * 1000)
                   and not ingestor._checkpoint_due(T0 + (s - 1) * 1000)]
        assert len(seconds) == 1 and 60 <= seconds[0] <= 120
        due_at[pair.pk] = seconds[0]
    assert len(set(due_at.values())) > len(pairs) // 2  # spread over the period, not one tick


def test_a_taker_whose_feed_fails_withdraws_its_handover_and_the_owner_keeps_the_pair(pairs):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 3_000)
    worker_heartbeat(owner="B"), claim("B")
    failing = mock.Mock(live=True)
    failing.complete_from_ms.side_effect = RuntimeError("the exchange refused the symbol")
    with mock.patch.object(leases, "source_for", return_value=failing):
        handovers_prepare(owner="B", pairs={})
    assert not IngestionState.objects.filter(handover_to="B").exists()
    assert tick("A", a, T0 + 6_000).handed_over == set() and owners() == {"A": 12}


def test_a_taker_that_gets_a_pair_it_asked_for_as_a_lapsed_lease_ingests_it_itself(pairs, settings):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 3_000)
    worker_heartbeat(owner="B"), claim("B")
    asked = set(IngestionState.objects.filter(handover_to="B").values_list("pair_id", flat=True))
    lapsed = clock.utcnow() - timedelta(seconds=settings.INGESTION_LEASE_SECONDS + 1)
    IngestionWorker.objects.filter(owner="A").update(seen_at=lapsed)  # A died before handing over
    IngestionState.objects.filter(lease_owner="A").update(lease_until=lapsed)
    b: dict[int, PairIngestor] = {}
    outcome = tick("B", b, T0 + 6_000)
    assert asked <= set(outcome.results) and not outcome.handed_over and not outcome.failed
    assert not IngestionState.objects.exclude(handover_to="").exists() and owners() == {"B": 12}
    for pair in pairs:
        assert_second_bars_are_the_simulators(pair, T0, T0 + 6_000, str(pair))


def test_a_process_leaving_withdraws_the_handovers_asked_of_it(pairs):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 3_000)
    worker_heartbeat(owner="B"), claim("B")
    worker_leave(owner="A")
    assert not IngestionState.objects.exclude(handover_to="").exists()


def test_a_handover_to_a_taker_that_died_is_withdrawn_even_while_the_pair_has_nothing_new(pairs):
    a: dict[int, PairIngestor] = {}
    tick("A", a, T0 + 3_000)
    worker_heartbeat(owner="B"), claim("B")
    IngestionWorker.objects.filter(owner="B").delete()
    tick("A", a, T0 + 3_000)  # no new second to close
    assert not IngestionState.objects.exclude(handover_to="").exists()
