"""Leases: which process ingests which pair, and the pairs spread evenly between them.

Processes own pairs through a lease (owner + expiry on the state row, renewed every tick);
a step refuses to write for a pair whose lease it lost. Every ingestion process (each
Celery worker process in the full mode, the server's thread in embedded mode) runs the
same loop for its lifetime and holds its fair share of the wanted pairs: the pairs
divided by the processes seen running (`IngestionWorker`). A process joining asks the
ones above their share to hand pairs over; a process leaving releases its leases; a
process killed loses them when they expire. The leases are the only truth of who
ingests what."""

from __future__ import annotations

import logging
import random
from datetime import timedelta

from django.conf import settings
from django.db.models import Case, F, Q, Value, When

from config import clock
from market.models import Pair

from .models import IngestionState, IngestionWorker
from .sources import pair_ref, source_for

logger = logging.getLogger(__name__)


# -- the wanted pairs ----------------------------------------------------------------------

def wanted_pair_ids() -> list[int]:
    grace_end = clock.utcnow() - timedelta(seconds=settings.INGESTION_GRACE_SECONDS)
    return list(IngestionState.objects.filter(wanted=True, fatal=False)
                .filter(Q(unwanted_since__isnull=True) | Q(unwanted_since__gt=grace_end))
                .values_list("pair_id", flat=True))


def retire_unwanted() -> int:
    """Pairs whose grace period ended stop being wanted (their bars stay)."""
    grace_end = clock.utcnow() - timedelta(seconds=settings.INGESTION_GRACE_SECONDS)
    return IngestionState.objects.filter(wanted=True, unwanted_since__lte=grace_end).update(
        wanted=False, lease_owner="", lease_until=None)


# -- leases and the processes' fair shares ---------------------------------------------------

def leases_acquire(*, owner: str, pair_ids: list[int]) -> list[int]:
    """Take or renew the lease of each listed pair that is free, expired or already ours, in
    one statement (the condition is checked per row, so two processes never both win one)."""
    if not pair_ids:
        return []
    now = clock.utcnow()
    until = now + timedelta(seconds=settings.INGESTION_LEASE_SECONDS)
    asked_by_me = Q(handover_to=owner)
    IngestionState.objects.filter(pair_id__in=pair_ids, wanted=True, fatal=False).filter(
        Q(lease_owner="") | Q(lease_owner=owner) | Q(lease_until__lt=now)
    ).update(lease_owner=owner, lease_until=until,  # a pair it had asked for is its own now: the request goes
             handover_to=Case(When(asked_by_me, then=Value("")), default=F("handover_to")),
             handover_ready_ms=Case(When(asked_by_me, then=Value(None)), default=F("handover_ready_ms")))
    owned = set(IngestionState.objects.filter(pair_id__in=pair_ids, lease_owner=owner).values_list("pair_id", flat=True))
    return [pair_id for pair_id in pair_ids if pair_id in owned]


def leases_release(*, owner: str) -> None:
    IngestionState.objects.filter(lease_owner=owner).update(lease_owner="", lease_until=None, handover_to="",
                                                            handover_ready_ms=None)
    IngestionState.objects.filter(handover_to=owner).update(handover_to="", handover_ready_ms=None)


def worker_heartbeat(*, owner: str) -> frozenset[str]:
    """Say this process runs; returns the processes seen within the lease period (this one
    included). Rows of processes gone for ten lease periods are removed."""
    now = clock.utcnow()
    if not IngestionWorker.objects.filter(owner=owner).update(seen_at=now):
        IngestionWorker.objects.get_or_create(owner=owner, defaults={"seen_at": now})
    period = timedelta(seconds=settings.INGESTION_LEASE_SECONDS)
    if random.random() < 0.01:
        IngestionWorker.objects.filter(seen_at__lt=now - 10 * period).delete()
    return frozenset(IngestionWorker.objects.filter(seen_at__gte=now - period).values_list("owner", flat=True)) | {owner}


def worker_leave(*, owner: str) -> None:
    leases_release(owner=owner)
    IngestionWorker.objects.filter(owner=owner).delete()


def fair_share(wanted: int, workers: int) -> int:
    """The most pairs one of `workers` processes holds: the wanted pairs spread evenly."""
    return -(-wanted // max(workers, 1))


def leases_claim(*, owner: str, alive: frozenset[str], wanted: list[int]) -> list[int]:
    """This process's pairs for the next tick: it renews its leases, takes free or expired
    ones up to its fair share, and asks the processes above their share to hand pairs over
    (the owner hands one over in the commit that brings its cursor to where this process's
    own feed of the pair is complete: `PairIngestor.advance`). Returns the pairs it owns."""
    share = fair_share(len(wanted), len(alive))
    wanted_set = set(wanted)
    rows = list(IngestionState.objects.filter(pair_id__in=wanted).values_list(
        "pair_id", "lease_owner", "lease_until", "handover_to"))
    now = clock.utcnow()
    mine = [pair_id for pair_id, lease_owner, _, _ in rows if lease_owner == owner]
    asked = [pair_id for pair_id, lease_owner, _, handover_to in rows if handover_to == owner and lease_owner != owner]
    free = [pair_id for pair_id, lease_owner, until, _ in rows
            if lease_owner != owner and (not lease_owner or until is None or until < now or lease_owner not in alive)]
    need = share - len(mine)
    random.shuffle(free)  # processes taking free pairs at once mostly pick different ones
    candidates = mine + free[:max(need, 0)]
    owned = leases_acquire(owner=owner, pair_ids=candidates)
    need = share - len(owned)
    if need > len(asked):
        held: dict[str, list[int]] = {}
        for pair_id, lease_owner, until, handover_to in rows:
            if lease_owner and lease_owner != owner and lease_owner in alive and not handover_to and pair_id in wanted_set:
                held.setdefault(lease_owner, []).append(pair_id)
        ask = []
        for other, pairs in sorted(held.items(), key=lambda item: -len(item[1])):
            surplus = len(pairs) - share
            if surplus > 0:
                ask.extend(sorted(pairs)[-surplus:])
        ask = ask[:need - len(asked)]
        if ask:
            IngestionState.objects.filter(pair_id__in=ask, handover_to="").exclude(lease_owner=owner).update(
                handover_to=owner, handover_ready_ms=None)
    elif need < len(asked):  # more asked than this process may still take (another one joined)
        IngestionState.objects.filter(pair_id__in=asked[:len(asked) - max(need, 0)], handover_to=owner).update(
            handover_to="", handover_ready_ms=None)
    return owned


def pair_looked_up(pairs: dict[int, Pair], pair_id: int) -> Pair:
    """The pair, from the loop's own lookups (read once per process)."""
    pair = pairs.get(pair_id)
    if pair is None:
        pair = pairs[pair_id] = Pair.objects.select_related("exchange", "base", "quote").get(pk=pair_id)
    return pair


def handovers_prepare(*, owner: str, pairs: dict[int, Pair]) -> None:
    """For each pair this process asked for, every tick: listen (a live feed is opened at
    once, so it holds every event the owner's last step leaves unread, and reading it keeps
    it from being closed as idle) and tell the owner from when it may hand over: at once
    for a source that can replay its past; for an exchange feed, from two seconds after the
    feed's book snapshot, and not at all while the feed has lost its book (the point moves
    with a resync)."""
    asked = dict(IngestionState.objects.filter(handover_to=owner).exclude(lease_owner=owner)
                 .values_list("pair_id", "handover_ready_ms"))
    for pair_id, told in asked.items():
        pair = pair_looked_up(pairs, pair_id)
        source = source_for(pair)
        ready_ms = 0
        if getattr(source, "live", False):
            try:
                ready_ms = source.complete_from_ms(pair_ref(pair))
            except Exception:  # this process cannot listen to the pair: the owner keeps it
                logger.warning("Could not prepare to take %s over", pair, exc_info=True)
                IngestionState.objects.filter(pair_id=pair_id, handover_to=owner).update(
                    handover_to="", handover_ready_ms=None)
                continue
        if ready_ms != told:
            IngestionState.objects.filter(pair_id=pair_id, handover_to=owner).update(handover_ready_ms=ready_ms)


def pairs_without_a_worker() -> int:
    now = clock.utcnow()
    return IngestionState.objects.filter(pair_id__in=wanted_pair_ids()).filter(
        Q(lease_owner="") | Q(lease_until__lt=now)).count()
