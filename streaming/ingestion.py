"""Ingestion: a pair's events become 1-second bars in the store, restartably.

One step, in one transaction: lock the pair's IngestionState, read the source's events
from the committed cursor to the watermark, build the second bars, upsert them (roll-ups
included), move the cursor. A worker killed at any point leaves the cursor where the last
committed bars end, so the next step (on any worker) neither loses nor repeats a bar.
A process steps all its pairs in one tick, one transaction (`ingest_tick`): each pair's
cursor still moves only with its own bars.

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
import os
import random
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Case, F, Q, Value, When

from config import clock
from market.bars import MINUTE_MS, Bar, floor_ms
from market.models import Pair, SecondBar
from market.services import bars_write, bars_write_many
from market.sources.bar_builder import BarBuilder
from market.sources.events import BookDelta, BookSnapshot, Quote, Trade

from . import live
from .feeds import ReadBehind
from .models import BookCheckpoint, IngestionState, IngestionWorker
from .sources import pair_ref, source_for

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    pass


def new_owner_id(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class StepResult:
    pair_id: int
    bars: list[Bar]
    cursor_ms: int
    caught_up: bool


class PairIngestor:
    """Turns one pair's events into bars. Keeps the bar builder (with its order book) in
    memory between steps; it is rebuilt whenever the committed cursor is not where this
    builder stopped (first step, another worker ran the pair, a failure): from the book
    checkpoint and the source's events since it, so the book is the one an uninterrupted
    run would hold, whatever the source sends snapshots."""

    def __init__(self, pair: Pair, owner: str = ""):
        self.pair = pair
        self.ref = pair_ref(pair)
        self.source = source_for(pair)
        self.live = getattr(self.source, "live", False)
        self.owner = owner
        self.builder: BarBuilder | None = None
        self.builder_cursor: int | None = None
        self.checkpoint_ms: int | None = None
        self.detection = None
        # Read ahead of the committed cursor (live feeds, `read_ahead`): the builder and the
        # detectors have seen the events before `fed_ms`; what they found and the last event
        # of each kind since the cursor wait here for the tick that closes their second.
        self.fed_ms: int | None = None
        self._found: list[dict] = []
        self._seen: dict[type, int] = {}

    def _warm_up_before_the_lock(self) -> list[dict] | None:
        """A warm-up replays up to half an hour of events. Inside the step's transaction it
        would hold the write lock that long (SQLite has one writer: a request writing
        meanwhile fails after its busy timeout), so it runs first, to the committed cursor;
        the step warms up again only if the cursor moved meanwhile. Not for a live feed: a
        process taking one over first moves the cursor past what it did not hear (in the step)."""
        if self.live:
            return None
        cursor = IngestionState.objects.filter(pair=self.pair).values_list("cursor_ms", flat=True).first()
        if cursor is None:  # a new pair: its first cursor is placed first, on its own
            with transaction.atomic():
                state = IngestionState.objects.select_for_update().get(pair=self.pair)
                if state.cursor_ms is None:
                    backfill_start(state=state, source=self.source, ref=self.ref, pair=self.pair)
                    state.save()
                cursor = state.cursor_ms
        if cursor is None or self.builder_cursor == cursor:
            return None
        return self._warm_up(cursor, self._before_any_event_step())

    def _before_any_event_step(self) -> bool:
        """The cursor is still where the backfill placed it after synthesising history (behind
        its coverage start) and no step has committed events of the pair yet, perhaps because
        the process that placed it died first: a cold warm-up's findings are kept."""
        state = IngestionState.objects.filter(pair=self.pair).values_list("cursor_ms", "coverage_from_ms").first()
        return bool(state) and state[1] is not None and state[0] != state[1] \
            and not SecondBar.objects.filter(pair=self.pair).exists()

    def _warm_up(self, cursor_ms: int, first_step: bool) -> list[dict]:
        """Bring the builder and the detectors to the cursor. Returns what the detectors
        found on the way that is to be stored: a checkpoint's replay finds what live
        detection found (the store skips what is already there); a cold warm-up's
        findings are kept on a pair's first step only, since its baselines start empty
        and it would report episodes live detection judged otherwise."""
        found: list[dict] = []
        if settings.SCHEMES_DETECTION:
            from schemes.detection import PairDetection
            from schemes.selectors import detector_checkpoint_get

            checkpoint = detector_checkpoint_get(pair=self.pair)
            if checkpoint is not None and self.live and not self.source.covers(self.ref, checkpoint.cursor_ms):
                checkpoint = None
            self.detection, found, replayed = PairDetection.warmed_up(self.ref, self.source, cursor_ms, checkpoint)
            if not (replayed or first_step):
                found = []
        self.builder, self.builder_cursor = self._restored_builder(cursor_ms), cursor_ms
        self.fed_ms, self._found, self._seen = cursor_ms, [], {}
        return found

    def _restored_builder(self, cursor_ms: int) -> BarBuilder:
        checkpoint = BookCheckpoint.objects.filter(pair=self.pair, cursor_ms__lte=cursor_ms).first()
        if checkpoint is not None and (not self.live or self.source.covers(self.ref, checkpoint.cursor_ms)):
            try:
                builder = BarBuilder.restore(self.ref, bytes(checkpoint.state))
            except ValueError:  # a state of another version: fall back to a rebuild
                builder = None
            if builder is not None:
                if checkpoint.cursor_ms < cursor_ms:  # these bars are stored already
                    builder.feed_many(self.source.events(self.ref, checkpoint.cursor_ms, cursor_ms))
                    builder.flush(cursor_ms)
                self.checkpoint_ms = checkpoint.cursor_ms
                return builder
        self.checkpoint_ms = None
        builder = BarBuilder(self.ref, start_ms=cursor_ms)
        if not self.live:  # no checkpoint yet: the sources that replay send a snapshot every minute
            warm_from = floor_ms(cursor_ms, "minute")
            if warm_from < cursor_ms:
                builder.feed_many(self.source.events(self.ref, warm_from, cursor_ms))
                builder.flush(cursor_ms)
        return builder

    def _window_end(self, until_ms: int, state: IngestionState) -> int:
        """Where this step may close seconds: before now minus the lag; for a live feed,
        no later than the time it vouches for; for a recording, its last second."""
        if self.live:
            vouched = self.source.window_end(self.ref, clock.now_ms())
            return min(until_ms, floor_ms(vouched, "second")) if vouched is not None else state.cursor_ms or 0
        latest = getattr(self.source, "latest_ms", None)
        last = latest(self.ref) if latest is not None else None
        if last is not None:
            until_ms = min(until_ms, floor_ms(last, "second") + 1000)
        return until_ms

    def _skip_unheard(self, state: IngestionState) -> None:
        """A live feed that started after the cursor (this process took the pair over, or
        restarted) has nothing before its first event: the cursor moves there without
        bars, and the stretch is recorded as a gap rather than filled with empty seconds."""
        heard_from = self.source.earliest_ms(self.ref)
        if heard_from is None:
            return
        resume = floor_ms(heard_from, "second")
        if resume > state.cursor_ms and not self.source.covers(self.ref, state.cursor_ms):
            state.gaps = [*state.gaps[-49:], [state.cursor_ms, resume]]
            logger.warning("%s: no feed data from %s to %s (no worker was listening)", self.pair, state.cursor_ms, resume)
            state.cursor_ms = resume
            self.builder_cursor = None

    def step(self, until_ms: int) -> StepResult | None:
        """Ingest from the committed cursor up to until_ms (at most one window): a tick of
        this pair alone, in its own transaction."""
        outcome = ingest_tick([self], until_ms)
        if self.pair.pk in outcome.lost:
            raise LeaseLost(f"{self.owner} no longer owns {self.pair}")
        if self.pair.pk in outcome.failed:
            raise outcome.failed[self.pair.pk]
        return outcome.results.get(self.pair.pk)

    def reset(self) -> None:
        """The builder and detectors saw events that did not commit: rebuild them next step."""
        self.builder_cursor = None
        self.detection = None
        self.fed_ms, self._found, self._seen = None, [], {}

    def read_ahead(self, now_ms: int) -> None:
        """Between ticks, feed the builder and the detectors the live events the feed already
        vouches for, so that the tick closing their second only reads its last moments and
        writes: a process's tick of 50 busy pairs otherwise did all of a second's work at
        once, while the seconds waited. Never past the end of the second after the committed
        cursor: every tick that closes seconds ends at or after it, so the builder is never
        fed past the point it is flushed to (a checkpoint is taken there, with no second
        half-read). The same events in the same order as one read at the tick: the bars and
        detections are the same. Writes nothing; a tick that fails forgets all of it (reset)."""
        if not self.live or self.builder is None or self.builder_cursor is None or self.fed_ms is None:
            return
        vouched = self.source.window_end(self.ref, now_ms)
        if vouched is None:
            return
        until = min(vouched, now_ms - settings.INGESTION_LAG_MS, self.builder_cursor + 1000)
        try:
            self._feed(until, closing=False)
        except ReadBehind:  # an event came after this read passed its time: the tick reads again
            self.reset()

    def _feed(self, until_ms: int, *, closing: bool = True) -> None:
        """Feed the builder and the detectors the source's events from `fed_ms` to until_ms
        (a read ahead of a live feed does not close the seconds it reads)."""
        if until_ms <= self.fed_ms:
            return
        builder_feed, detect = self.builder.feed, self.detection.feed if self.detection is not None else None
        found, seen = self._found, self._seen
        events = self.source.events(self.ref, self.fed_ms, until_ms) if closing else \
            self.source.events(self.ref, self.fed_ms, until_ms, closing=False)
        for event in events:
            builder_feed(event)
            if detect is not None:
                detected = detect(event)
                if detected:
                    found.extend(detected)
            seen[type(event)] = event.ts_ms
        self.fed_ms = until_ms

    def advance(self, state: IngestionState, until_ms: int, warmed: list[dict] | None,
                alive: frozenset[str] | None = None) -> _Advance | None:
        """Under the tick's lock of `state`: read the events from the committed cursor to
        the window's end through the builder and detectors, and change `state` as the
        write will leave it. Writes nothing itself, except a new pair's first cursor
        (its backfill). None: nothing to write (the state may still have changed)."""
        if self.owner and state.lease_owner != self.owner:
            raise LeaseLost(f"{self.owner} no longer owns {self.pair}")
        if state.handover_to and (state.handover_to == state.lease_owner or
                                  (alive is not None and state.handover_to not in alive)):
            state.handover_to, state.handover_ready_ms = "", None  # the taker owns it already, or is gone
        if self.owner and state.lease_until < clock.utcnow():
            # lapsed during the warm-up, and nobody took it: the row lock is ours now
            state.lease_until = clock.utcnow() + timedelta(seconds=settings.INGESTION_LEASE_SECONDS)
        first_step = state.cursor_ms is None
        if first_step:
            backfill_start(state=state, source=self.source, ref=self.ref, pair=self.pair)
            if state.cursor_ms is None:  # a live feed that sent nothing yet, a pair the recording lacks
                if self.live:
                    self._note_feed(state)
                return None
        elif self.live and self.builder_cursor != state.cursor_ms:
            self._skip_unheard(state)
        cursor = state.cursor_ms
        end = min(self._window_end(until_ms, state), cursor + settings.INGESTION_MAX_WINDOW_MS)
        if end <= cursor:
            if self.live:
                self._note_feed(state)
            return None
        detections = warmed if warmed is not None and self.builder_cursor == cursor else []
        if self.builder_cursor != cursor or self.fed_ms > end:  # the cursor moved since (another process stepped)
            detections = self._warm_up(cursor, self._before_any_event_step())
        try:
            self._feed(end)
        except ReadBehind:  # a read ahead passed an event that came later: read the second again
            detections = self._warm_up(cursor, self._before_any_event_step())
            self._feed(end)
        builder = self.builder
        detections = detections + self._found if detections else self._found
        seen, self._found, self._seen = self._seen, [], {}
        bars = builder.flush(end)
        handing_over = bool(state.handover_to) and state.handover_ready_ms is not None \
            and end >= state.handover_ready_ms and (alive is None or state.handover_to in alive)
        book_due = handing_over or self._checkpoint_due(end)
        book_state = builder.state() if book_due else None
        # the detectors' with the book's: a live feed's buffer is trimmed to the book
        # checkpoint, and a detector checkpoint older than that could not be replayed
        detector_state = self.detection.state() if self.detection is not None and book_due else None
        state.cursor_ms = end
        if self.live:
            self._note_feed(state)
        else:
            state.heartbeat_at = clock.utcnow()
        state.trade_seen_ms = seen.get(Trade, state.trade_seen_ms)
        book_seen = max(seen.get(BookSnapshot, 0), seen.get(BookDelta, 0)) or None
        state.book_seen_ms = book_seen or state.book_seen_ms
        state.quote_seen_ms = seen.get(Quote, state.quote_seen_ms)
        if state.last_error and not state.fatal:
            state.last_error = ""
        if handing_over:  # the taker's feed holds everything from here: the lease moves with this commit
            state.lease_owner, state.handover_to, state.handover_ready_ms = state.handover_to, "", None
            state.lease_until = clock.utcnow() + timedelta(seconds=settings.INGESTION_LEASE_SECONDS)
        return _Advance(self, end, bars, detections, book_state, detector_state, handing_over)

    def _checkpoint_due(self, end: int) -> bool:
        """Every INGESTION_BOOK_CHECKPOINT_SECONDS, at a second of the period of the pair's
        own (pairs started together would otherwise all pickle their book and detectors in
        the same tick, once a minute: that tick ran seconds long at 100 pairs); a step that
        jumps past its second checkpoints at twice the period at the latest."""
        if self.checkpoint_ms is None:
            return True
        period = settings.INGESTION_BOOK_CHECKPOINT_SECONDS * 1000
        since = end - self.checkpoint_ms
        if since >= 2 * period:
            return True
        if since < period:
            return False
        own_second = (self.pair.pk * 7919) % (period // 1000)
        return any((second + own_second) % (period // 1000) == 0 for second in range(
            (end - since + period) // 1000, end // 1000 + 1))

    def committed(self, advance: _Advance) -> None:
        """The tick that wrote `advance` committed: the builder and detectors are at its end."""
        self.builder_cursor = advance.end
        if advance.detector_state is not None:
            self.detection.checkpoint_ms = advance.end
        if advance.book_state is not None:
            self.checkpoint_ms = advance.end
            if self.live:
                self.source.trim_before(self.ref, advance.end)
        if advance.handed_over:
            release = getattr(self.source, "release", None)
            if release is not None:
                release(self.ref)

    def _note_feed(self, state: IngestionState) -> None:
        """A live feed's own signals; its heartbeat is its last real message."""
        state.feed = self.source.signals(self.ref)
        heard = self.source.heartbeat_ms(self.ref)
        if heard is not None:
            state.heartbeat_at = datetime.fromtimestamp(heard / 1000, tz=dt_timezone.utc)


@dataclass
class _Advance:
    ingestor: PairIngestor
    end: int
    bars: list[Bar]
    detections: list[dict]
    book_state: bytes | None
    detector_state: bytes | None
    handed_over: bool


@dataclass
class TickOutcome:
    results: dict[int, StepResult] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)  # pairs whose lease another process holds now
    failed: dict[int, BaseException] = field(default_factory=dict)
    handed_over: set[int] = field(default_factory=set)


_STATE_FIELDS = ["cursor_ms", "coverage_from_ms", "heartbeat_at", "trade_seen_ms", "book_seen_ms", "quote_seen_ms",
                 "lease_owner", "lease_until", "handover_to", "handover_ready_ms", "last_error", "feed", "gaps",
                 "updated_at"]


def ingest_tick(ingestors: list[PairIngestor], until_ms: int, *, alive: frozenset[str] | None = None) -> TickOutcome:
    """One tick of many pairs in ONE transaction: lock their states, advance each, then
    write every pair's bars together (one upsert per table, market.services.bars_write_many),
    the checkpoints due, and the states (one statement), and publish after the commit.
    Every pair's cursor still moves only with its own bars. A pair whose advance raises is
    left out of the tick (its builder is rebuilt next time); if the write itself fails, the
    tick is retried pair by pair, so one pair's bad data costs only that pair its step."""
    until_ms = floor_ms(until_ms, "second")
    outcome = TickOutcome()
    warmed: dict[int, list[dict] | None] = {}
    for ingestor in ingestors:
        try:
            warmed[ingestor.pair.pk] = ingestor._warm_up_before_the_lock()
        except Exception as exc:
            ingestor.reset()
            outcome.failed[ingestor.pair.pk] = exc
    ready = [i for i in ingestors if i.pair.pk not in outcome.failed]
    if not ready:
        return outcome
    advances: list[_Advance] = []
    try:
        with transaction.atomic():
            states = IngestionState.objects.select_for_update().in_bulk([i.pair.pk for i in ready], field_name="pair_id")
            touched = []
            for ingestor in ready:
                pair_id = ingestor.pair.pk
                state = states.get(pair_id)
                try:
                    if state is None:
                        raise LeaseLost(f"{ingestor.pair} is not ingested")
                    advance = ingestor.advance(state, until_ms, warmed.get(pair_id), alive)
                except LeaseLost:
                    ingestor.reset()
                    outcome.lost.add(pair_id)
                    continue
                except Exception as exc:
                    ingestor.reset()
                    outcome.failed[pair_id] = exc
                    continue
                touched.append(state)
                if advance is not None:
                    advances.append(advance)
            _write_tick(advances, touched)
    except Exception:
        for advance in advances:
            advance.ingestor.reset()
        if len(ready) == 1:
            raise
        logger.warning("A tick of %d pairs failed to write; stepping them one by one", len(ready), exc_info=True)
        for ingestor in ready:
            outcome.failed.pop(ingestor.pair.pk, None)  # retried alone: its own outcome counts
            try:
                alone = ingest_tick([ingestor], until_ms, alive=alive)
            except Exception as exc:
                outcome.failed[ingestor.pair.pk] = exc
                continue
            outcome.results.update(alone.results)
            outcome.lost |= alone.lost
            outcome.failed.update(alone.failed)
            outcome.handed_over |= alone.handed_over
        return outcome
    for advance in advances:
        ingestor = advance.ingestor
        ingestor.committed(advance)
        outcome.results[ingestor.pair.pk] = StepResult(ingestor.pair.pk, advance.bars, advance.end,
                                                       caught_up=advance.end >= until_ms)
        if advance.handed_over:
            outcome.handed_over.add(ingestor.pair.pk)
    return outcome


def _states_save(states: list[IngestionState]) -> None:
    """Save the tick's states: one UPDATE by primary key, sent for all of them at once
    (psycopg pipelines an executemany). Django's bulk_update builds a CASE expression per
    field and row: at 20 pairs it was a fifth of the worker's time (docs/DECISIONS.md)."""
    now = clock.utcnow()
    meta = IngestionState._meta
    fields = [meta.get_field(name) for name in _STATE_FIELDS]
    quote = connection.ops.quote_name
    sql = (f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
           f"WHERE {quote(meta.pk.column)} = %s")
    rows = []
    for state in states:
        state.updated_at = now
        rows.append([f.get_db_prep_save(getattr(state, f.attname), connection) for f in fields] + [state.pk])
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _write_tick(advances: list[_Advance], states: list[IngestionState]) -> None:
    from schemes.services import detector_checkpoints_save, scheme_events_store

    bars_write_many(granularity="second", bars_by_pair=[(a.ingestor.pair, a.bars) for a in advances if a.bars])
    detector_checkpoints_save(checkpoints=[(a.ingestor.pair, a.end, a.detector_state)
                                           for a in advances if a.detector_state is not None])
    books = [BookCheckpoint(pair=a.ingestor.pair, cursor_ms=a.end, state=a.book_state)
             for a in advances if a.book_state is not None]
    if books:
        BookCheckpoint.objects.bulk_create(books, update_conflicts=True, unique_fields=["pair"],
                                           update_fields=["cursor_ms", "state", "updated_at"])
    if states:
        _states_save(states)
    published = [(a.ingestor.pair, a.bars) for a in advances if a.bars]
    if published:
        transaction.on_commit(lambda: live.publish_bars_many(published))
    for advance in advances:  # after the bars: live, a step's scheme events follow its bars
        if advance.detections:
            scheme_events_store(pair=advance.ingestor.pair, detections=advance.detections)


def backfill_start(*, state: IngestionState, source, ref, pair: Pair) -> None:
    """Place the first cursor. A recording or a live feed starts where its data does,
    whatever its age (bars land at their own timestamps). Otherwise the backfill window
    before now (24 h where the source can provide it): a source that can synthesise
    history (the simulator) fills all but the last minutes at once as minute bars, so a
    new subscription is covered within seconds; events then take over from the cursor
    and second bars start there."""
    earliest = source.earliest_ms(ref)
    if getattr(source, "live", False) or source.name == "replay":
        if earliest is not None:
            state.cursor_ms = state.coverage_from_ms = floor_ms(earliest, "second")
        return
    now = floor_ms(clock.now_ms(), "second")
    start = floor_ms(now - settings.INGESTION_BACKFILL_HOURS * 3_600_000, "minute")
    if earliest is not None:
        start = max(start, floor_ms(earliest, "second"))
    cursor = start
    synthesize = getattr(source, "synthesize_bars", None)
    if synthesize is not None:
        live_from = floor_ms(now, "minute") - settings.INGESTION_EVENT_BACKFILL_MINUTES * MINUTE_MS
        if live_from > start:
            bars_write(pair=pair, granularity="minute", bars=synthesize(ref, start, live_from, "minute"))
            cursor = live_from
    state.cursor_ms = cursor
    state.coverage_from_ms = start


# -- wanting a pair ------------------------------------------------------------------------

def ingestion_want(*, pair: Pair) -> IngestionState:
    """Someone subscribes: make sure the pair is ingested (starting it if nobody was)."""
    state, _ = IngestionState.objects.get_or_create(pair=pair)
    if not state.wanted or state.unwanted_since:
        IngestionState.objects.filter(pk=state.pk).update(wanted=True, unwanted_since=None)
        state.refresh_from_db()
    if state.fatal:
        return state
    transaction.on_commit(lambda: _kick(pair.pk))
    return state


def ingestion_unwant(*, pair: Pair) -> None:
    """The last subscriber left: ingestion stops after the grace period."""
    IngestionState.objects.filter(pair=pair, wanted=True, unwanted_since__isnull=True).update(
        unwanted_since=clock.utcnow())


def _kick(pair_id: int) -> None:
    """Embedded mode: make sure the server's ingestion thread runs. In the full mode every
    worker process's loop looks for wanted pairs each tick: nothing to send."""
    if settings.INGESTION_AUTOSTART and settings.INGESTION_IN_PROCESS and EmbeddedIngestion.serving:
        # a command (seed_demo, the shell) leaves ingestion to the server
        EmbeddedIngestion.ensure_started()


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


# -- leases, the processes' fair shares and the worker loop ----------------------------------------

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


def _pair(pairs: dict[int, Pair], pair_id: int) -> Pair:
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
        pair = _pair(pairs, pair_id)
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


def record_failure(pair_id: int, exc: BaseException, *, fatal: bool = False) -> None:
    IngestionState.objects.filter(pair_id=pair_id).update(
        last_error=f"{type(exc).__name__}: {exc}"[:2000], last_error_at=clock.utcnow(), fatal=fatal)


def run_loop(*, owner: str, stop: threading.Event | None = None, tick_seconds: float = 1.0,
             join_seconds: float = 0.0) -> None:
    """The ingestion loop of one process, until `stop` is set: every tick it says it runs,
    holds its fair share of the wanted pairs (leases_claim) and ingests them all in one
    tick (ingest_tick). On the way out it releases its leases and leaves, so the other
    processes take its pairs over at once."""
    ingestors: dict[int, PairIngestor] = {}
    pairs: dict[int, Pair] = {}
    announced: dict[int, str] = {}
    next_announce = 0.0
    if join_seconds:  # processes started together see each other before they share the pairs out
        close_old_connections()
        try:
            worker_heartbeat(owner=owner)
        except Exception:
            logger.exception("Could not announce the ingestion process")
        finally:
            close_old_connections()
        (stop or threading.Event()).wait(join_seconds)
    try:
        while not (stop and stop.is_set()):
            started = time.monotonic()
            close_old_connections()
            try:
                retire_unwanted()
                alive = worker_heartbeat(owner=owner)
                owned = leases_claim(owner=owner, alive=alive, wanted=wanted_pair_ids())
                handovers_prepare(owner=owner, pairs=pairs)
                for pair_id in owned:
                    if pair_id not in ingestors:
                        ingestors[pair_id] = PairIngestor(_pair(pairs, pair_id), owner)
                for gone in set(ingestors) - set(owned):
                    ingestors.pop(gone)
                try:
                    outcome = ingest_tick([ingestors[p] for p in owned], clock.now_ms() - settings.INGESTION_LAG_MS,
                                          alive=alive)
                except Exception as exc:  # a tick of one pair raises what its write raised
                    if len(owned) != 1:
                        raise
                    outcome = TickOutcome(failed={owned[0]: exc})
                for pair_id in outcome.lost | outcome.handed_over:
                    ingestors.pop(pair_id, None)
                for pair_id, exc in outcome.failed.items():
                    logger.error("Ingestion step failed for pair %s", pair_id, exc_info=exc)
                    record_failure(pair_id, exc, fatal=_is_fatal(exc))
                if time.monotonic() >= next_announce:
                    next_announce = time.monotonic() + settings.INGESTION_STATUS_EVERY_SECONDS
                    announce_state_changes(ingestors, announced)
            except Exception:
                logger.exception("Ingestion loop iteration failed; retrying")
            finally:
                close_old_connections()
            _wait_reading_ahead(ingestors, _until_next_tick(tick_seconds, time.monotonic() - started), stop)
    finally:
        try:
            worker_leave(owner=owner)
        finally:
            close_old_connections()


# A second can be closed once INGESTION_LAG_MS have passed after its end (a live feed vouches
# for its time that much behind now, in the exchange's clock, which runs a few milliseconds
# behind ours on a near exchange); ticks fire this long after that moment, so a second is
# stored about INGESTION_LAG_MS + this + the tick's own time after it ends, not up to a
# whole tick later on top.
TICK_AFTER_CLOSE_MS = 100


def _until_next_tick(tick_seconds: float, elapsed: float) -> float:
    """Seconds to wait for the next tick: until the next moment a second becomes closable
    (plus TICK_AFTER_CLOSE_MS); after a tick that ran a whole period, 50 ms (it is behind)."""
    period_ms = int(tick_seconds * 1000)
    if period_ms <= 0 or elapsed * 1000 >= period_ms:
        return 0.05
    phase = (settings.INGESTION_LAG_MS + TICK_AFTER_CLOSE_MS) % period_ms
    return max((phase - time.time() * 1000) % period_ms, 1) / 1000


def _wait_reading_ahead(ingestors: dict[int, PairIngestor], wait: float, stop: threading.Event | None) -> None:
    """Wait `wait` seconds for the next tick, reading the live pairs' events ahead of it
    every INGESTION_READ_AHEAD_MS (PairIngestor.read_ahead)."""
    deadline = time.monotonic() + wait
    period = settings.INGESTION_READ_AHEAD_MS / 1000
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (stop and stop.is_set()):
            return
        nap = min(left, period) if period > 0 else left
        if stop:
            stop.wait(nap)
        else:
            time.sleep(nap)
        if period > 0 and deadline - time.monotonic() > READ_AHEAD_BEFORE_TICK_S:
            now_ms = clock.now_ms()
            for ingestor in list(ingestors.values()):
                try:
                    ingestor.read_ahead(now_ms)
                except Exception:  # the tick meets the same failure and records it
                    logger.debug("reading ahead failed for %s", ingestor.pair, exc_info=True)
                    ingestor.reset()


# Right before a tick the tick itself reads: a read ahead would only delay it.
READ_AHEAD_BEFORE_TICK_S = 0.03


def announce_state_changes(ingestors: dict[int, PairIngestor], announced: dict[int, str]) -> None:
    """Tell the live feed when a pair's derived state changed since the last look."""
    from .selectors import pair_status

    for pair_id, ingestor in ingestors.items():
        status = pair_status(pair=ingestor.pair, account=None)
        if announced.get(pair_id) != status["state"]:
            announced[pair_id] = status["state"]
            status.pop("subscribed", None)
            live.publish_status(pair_id=pair_id, status=status)


def _is_fatal(exc: BaseException) -> bool:
    return type(exc).__name__ == "SourceFatalError"


class EmbeddedIngestion:
    """The in-process ingestion thread of embedded mode (no broker), run by the server
    process (config/asgi.py sets `serving`). A management command that subscribes does not
    start one: a thread of a short-lived process would take the leases and die with it,
    and the server would wait for them to lapse."""

    serving = False
    _thread: threading.Thread | None = None
    _stop = threading.Event()
    _lock = threading.Lock()

    @classmethod
    def ensure_started(cls) -> None:
        with cls._lock:
            if cls._thread is not None and cls._thread.is_alive():
                return
            cls._stop.clear()
            owner = new_owner_id("embedded")
            cls._thread = threading.Thread(target=run_loop, name="ingestion", daemon=True,
                                           kwargs={"owner": owner, "stop": cls._stop})
            cls._thread.start()

    @classmethod
    def stop(cls, timeout: float = 10) -> None:
        cls._stop.set()
        if cls._thread is not None:
            cls._thread.join(timeout)
