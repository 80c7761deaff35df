"""Ingestion of pairs: a pair's events become 1-second bars in the store, restartably.

One step, in one transaction: lock the pair's IngestionState, read the source's events
from the committed cursor to the watermark, build the second bars, upsert them (roll-ups
included), move the cursor. A worker killed at any point leaves the cursor where the last
committed bars end, so the next step (on any worker) neither loses nor repeats a bar.
A process steps all its pairs in one tick, one transaction (`ingest_tick`): each pair's
cursor still moves only with its own bars.

A step refuses to write for a pair whose lease its process lost (the leases:
streaming.leases; the process loop that runs the ticks: streaming.ingestion)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import connection, transaction

from config import clock
from market.bars import MINUTE_MS, Bar, floor_ms
from market.models import Pair
from market.selectors import second_bar_last_ts
from market.services import RollUpMemo, bars_write, bars_write_many
from market.sources.bar_builder import BarBuilder
from market.sources.events import BookDelta, BookSnapshot, Quote, Trade

from . import live
from .feeds import ReadBehind
from .models import BookCheckpoint, IngestionState
from .sources import pair_ref, source_for

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    pass


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
        # What the last committed write left in the pair's open minute, hour and day: the next
        # tick's seconds are folded into it (market.services.RollUpMemo). Only this process
        # writes the pair's seconds while it holds the lease; any rebuild forgets it.
        self.roll_up: RollUpMemo | None = None

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
            and second_bar_last_ts(pair_id=self.pair.pk) is None

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
        self.roll_up = None
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
        self.roll_up = None

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
        self.roll_up = advance.roll_up
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
    roll_up: RollUpMemo | None = None  # what the write returned, kept once it commits


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

    written = [a for a in advances if a.bars]
    memos = bars_write_many(granularity="second", bars_by_pair=[(a.ingestor.pair, a.bars) for a in written],
                            memos={a.ingestor.pair.pk: a.ingestor.roll_up for a in written})
    for advance in advances:
        advance.roll_up = memos.get(advance.ingestor.pair.pk) if advance.bars else advance.ingestor.roll_up
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
