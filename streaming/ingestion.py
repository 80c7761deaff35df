"""Ingestion: a pair's events become 1-second bars in the store, restartably.

One step, in one transaction: lock the pair's IngestionState, read the source's events
from the committed cursor to the watermark, build the second bars, upsert them (roll-ups
included), move the cursor. A worker killed at any point leaves the cursor where the last
committed bars end, so the next step (on any worker) neither loses nor repeats a bar.

Workers own pairs through a lease (owner + expiry on the state row, renewed every loop);
a step refuses to write for a pair whose lease it lost. Long-running Celery tasks run the
loop for a lifetime and re-queue themselves; a supervisor re-queues pairs whose lease ran
out. In embedded mode one in-process thread runs the same loop for every wanted pair."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q

from config import clock
from market.bars import MINUTE_MS, Bar, floor_ms
from market.models import Pair, SecondBar
from market.services import bars_write
from market.sources.bar_builder import BarBuilder
from market.sources.events import BookDelta, BookSnapshot, Quote, Trade

from . import live
from .models import BookCheckpoint, IngestionState
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


def _publish_after_commit(pair: Pair, bars: list[Bar]) -> None:
    if bars:
        transaction.on_commit(lambda: live.publish_bars(pair=pair, bars=bars))


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
        """Ingest from the committed cursor up to until_ms (at most one window)."""
        until_ms = floor_ms(until_ms, "second")
        try:
            warmed = self._warm_up_before_the_lock()
            with transaction.atomic():
                state = IngestionState.objects.select_for_update().get(pair=self.pair)
                if self.owner and state.lease_owner != self.owner:
                    raise LeaseLost(f"{self.owner} no longer owns {self.pair}")
                if self.owner and state.lease_until < clock.utcnow():
                    # lapsed during the warm-up, and nobody took it: the row lock is ours now
                    state.lease_until = clock.utcnow() + timedelta(seconds=settings.INGESTION_LEASE_SECONDS)
                first_step = state.cursor_ms is None
                if first_step:
                    backfill_start(state=state, source=self.source, ref=self.ref, pair=self.pair)
                    if state.cursor_ms is None:  # a live feed that sent nothing yet, a pair the recording lacks
                        if self.live:
                            self._note_feed(state)
                            state.save()
                        return None
                elif self.live and self.builder_cursor != state.cursor_ms:
                    self._skip_unheard(state)
                cursor = state.cursor_ms
                end = min(self._window_end(until_ms, state), cursor + settings.INGESTION_MAX_WINDOW_MS)
                if end <= cursor:
                    if self.live:
                        self._note_feed(state)
                        state.save()
                    return None
                detections = warmed if warmed is not None and self.builder_cursor == cursor else []
                if self.builder_cursor != cursor:  # the cursor moved since (another process stepped)
                    detections = self._warm_up(cursor, self._before_any_event_step())
                seen = {}
                detect = self.detection.feed if self.detection is not None else None
                for event in self.source.events(self.ref, cursor, end):
                    self.builder.feed(event)
                    if detect is not None:
                        detections.extend(detect(event))
                    seen[type(event)] = event.ts_ms
                bars = self.builder.flush(end)
                bars_write(pair=self.pair, granularity="second", bars=bars)
                if self.detection is not None and self.detection.checkpoint_due(end):
                    from schemes.services import detector_checkpoint_save

                    detector_checkpoint_save(pair=self.pair, cursor_ms=end, state=self.detection.state())
                    self.detection.checkpoint_ms = end
                if self.checkpoint_ms is None or end - self.checkpoint_ms >= settings.INGESTION_BOOK_CHECKPOINT_SECONDS * 1000:
                    BookCheckpoint.objects.update_or_create(pair=self.pair, defaults={
                        "cursor_ms": end, "state": self.builder.state()})
                    self.checkpoint_ms = end
                    if self.live:
                        transaction.on_commit(lambda: self.source.trim_before(self.ref, end))
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
                state.save()
                _publish_after_commit(self.pair, bars)
                if detections:  # after the bars: live, the step's scheme events follow its bars
                    from schemes.services import scheme_events_store

                    scheme_events_store(pair=self.pair, detections=detections)
        except BaseException:
            self.builder_cursor = None  # the builder and detectors saw events that did not commit
            self.detection = None
            raise
        self.builder_cursor = end
        return StepResult(self.pair.pk, bars, end, caught_up=end >= until_ms)

    def _note_feed(self, state: IngestionState) -> None:
        """A live feed's own signals; its heartbeat is its last real message."""
        state.feed = self.source.signals(self.ref)
        heard = self.source.heartbeat_ms(self.ref)
        if heard is not None:
            state.heartbeat_at = datetime.fromtimestamp(heard / 1000, tz=dt_timezone.utc)


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
    if not settings.INGESTION_AUTOSTART:
        return
    if settings.INGESTION_IN_PROCESS:
        if EmbeddedIngestion.serving:  # a command (seed_demo, the shell) leaves ingestion to the server
            EmbeddedIngestion.ensure_started()
        return
    from .tasks import supervise_ingestion

    supervise_ingestion.delay()


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


# -- leases and the worker loop ---------------------------------------------------------------

def leases_acquire(*, owner: str, pair_ids: list[int]) -> list[int]:
    """Take or renew the lease of each pair that is free, expired or already ours."""
    now = clock.utcnow()
    until = now + timedelta(seconds=settings.INGESTION_LEASE_SECONDS)
    owned = []
    for pair_id in pair_ids:
        updated = IngestionState.objects.filter(pair_id=pair_id, wanted=True, fatal=False).filter(
            Q(lease_owner="") | Q(lease_owner=owner) | Q(lease_until__lt=now)
        ).update(lease_owner=owner, lease_until=until)
        if updated:
            owned.append(pair_id)
    return owned


def leases_release(*, owner: str) -> None:
    IngestionState.objects.filter(lease_owner=owner).update(lease_owner="", lease_until=None)


def pairs_needing_a_worker() -> list[int]:
    now = clock.utcnow()
    return list(IngestionState.objects.filter(pair_id__in=wanted_pair_ids())
                .filter(Q(lease_owner="") | Q(lease_until__lt=now)).values_list("pair_id", flat=True))


def record_failure(pair_id: int, exc: BaseException, *, fatal: bool = False) -> None:
    IngestionState.objects.filter(pair_id=pair_id).update(
        last_error=f"{type(exc).__name__}: {exc}"[:2000], last_error_at=clock.utcnow(), fatal=fatal)


def run_loop(*, owner: str, pair_ids: list[int] | None, stop: threading.Event | None = None,
             lifetime_seconds: float | None = None, tick_seconds: float = 1.0) -> list[int]:
    """Own the given pairs (None: every wanted pair) and ingest them every tick until the
    lifetime ends or `stop` is set. Returns the pairs owned at the end; releases the leases
    on the way out. A task that owns none of its pairs for a lease period gives up: another
    worker has them."""
    deadline = time.monotonic() + lifetime_seconds if lifetime_seconds else None
    ingestors: dict[int, PairIngestor] = {}
    owned: list[int] = []
    idle_since = time.monotonic()
    announced: dict[int, str] = {}
    next_announce = 0.0
    try:
        while not (stop and stop.is_set()) and (deadline is None or time.monotonic() < deadline):
            started = time.monotonic()
            close_old_connections()
            try:
                retire_unwanted()
                wanted = wanted_pair_ids()
                candidates = wanted if pair_ids is None else [p for p in pair_ids if p in set(wanted)]
                owned = leases_acquire(owner=owner, pair_ids=candidates)
                if owned or pair_ids is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > settings.INGESTION_LEASE_SECONDS:
                    break
                until = clock.now_ms() - settings.INGESTION_LAG_MS
                for pair_id in owned:
                    ingestor = ingestors.get(pair_id)
                    if ingestor is None:
                        pair = Pair.objects.select_related("exchange", "base", "quote").get(pk=pair_id)
                        ingestor = ingestors[pair_id] = PairIngestor(pair, owner)
                    try:
                        ingestor.step(until)
                    except LeaseLost:
                        ingestors.pop(pair_id, None)
                    except Exception as exc:
                        logger.exception("Ingestion step failed for pair %s", pair_id)
                        record_failure(pair_id, exc, fatal=_is_fatal(exc))
                for gone in set(ingestors) - set(owned):
                    ingestors.pop(gone)
                if time.monotonic() >= next_announce:
                    next_announce = time.monotonic() + settings.INGESTION_STATUS_EVERY_SECONDS
                    announce_state_changes(ingestors, announced)
            except Exception:
                logger.exception("Ingestion loop iteration failed; retrying")
            finally:
                close_old_connections()
            elapsed = time.monotonic() - started
            wait = max(tick_seconds - elapsed, 0.05)
            if stop:
                stop.wait(wait)
            else:
                time.sleep(wait)
    finally:
        try:
            leases_release(owner=owner)
        finally:
            close_old_connections()
    return owned


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
                                           kwargs={"owner": owner, "pair_ids": None, "stop": cls._stop})
            cls._thread.start()

    @classmethod
    def stop(cls, timeout: float = 10) -> None:
        cls._stop.set()
        if cls._thread is not None:
            cls._thread.join(timeout)
