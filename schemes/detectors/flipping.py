"""Flipping: a large passive order at or near the touch is cancelled and, almost at once,
about the same size trades aggressively against that side or rests on the other side
(CFTC v Oystacher). Plain Python; driven by `DetectorEngine`.

The aggressive flip is the large taker orders against the side within the window: a taker
order is the trades printed in one millisecond (an order's fills share its timestamp), and
it counts when it is large on its own (FLIP_MIN_ORDER_TAKER_SECONDS), so a flip split into
a few orders is found while the crowd's many small orders never add up to one. The mirror
must rest: it is judged MIRROR_REST_MS after it
appeared, so a mirror flip is emitted that much after the add."""

from __future__ import annotations

from .book import cancel_attributed
from .layering import LAYER_MAX_DIST_SCALED

# thresholds (calibrated on simulator seeds 1-50; see docs/DETECTION_METHOD.md)
FLIP_MIN_SIZE_RATIO = 3.5  # x the typical level at that distance ...
FLIP_MIN_DEPTH_SHARE = 0.15  # ... and this share of the side's top-20 depth as it stood (DETECTION.md's 15 %) ...
FLIP_MIN_BASELINE_DEPTH_SHARE = 0.11  # ... and of its 30-minute median: a thin moment alone does not make it large
FLIP_MAX_DIST_SCALED = 4.0  # the large add stood 0..2 scaled ticks behind the touch (+ rounding, + our
# unit running below the simulator's on calm books: docs/DETECTION_METHOD.md)
FLIP_MAX_LIFE_MS = 12_000  # add -> pull (10 s, plus the time the pull takes)
# an order gone this soon was hardly seen, so it misled nobody: price running through a
# level or a quote replaced at once looks like this. On a netted feed, counted from the end
# of the batch that showed it: an order in one published book only was hardly seen either
FLIP_MIN_LIFE_MS = 100
FLIP_MIN_CANCELLED = 0.75  # share of the order cancelled by the pull
# ... most of it in one cancel: a spoof is withdrawn, not worn down by the queue's own cancels
# (a busy book chips a large resting order away in many small cancels)
FLIP_MIN_ONE_CANCEL = 0.65
FLIP_WINDOW_MS = 800  # pull -> flip (within a second, from the first print)
FLIP_MIN_FRACTION = 0.25  # aggressive flip: the large taker orders sum to >= this share of the pulled order ...
FLIP_MIN_TAKER_SECONDS = 5.0  # ... and >= this many typical taker seconds, a mirror too (DETECTION.md's 3,
# raised: busy books print 3-5 taker seconds within 800 ms of an unrelated pull)
FLIP_MIN_ORDER_TAKER_SECONDS = 1.0  # a taker order counts toward the flip from this size (the crowd's are smaller)
FLIP_MIN_MIRROR = 0.65  # a mirror add >= this share of the pulled order (DETECTION.md's 50 %, raised: see below)
# no trade confirms a mirror flip, and market makers moving their quotes look alike, so
# the mirror must match the pulled order more closely (above) and the pulled order must
# weigh more: this share of its side's 30-minute median top-20 depth
FLIP_MIN_MIRROR_DEPTH_SHARE = 0.15
# a netted feed shows the mirror's add net of its level's other changes in the batch (the
# queue's own cancels there), so there the mirror may fall this share of the order short
NETTED_MIRROR_ALLOWANCE = 0.05
# "rests on the other side": the mirror is judged after this long, and it has not rested when
# this share of it was cancelled by then (a quote flickering through, not a flipped order)
MIRROR_REST_MS = 500
MIRROR_MAX_CANCELLED = 0.5
# ... counting a cancel at its level as the mirror's only when it takes (about) all the mirror
# has left: a flipped order is withdrawn whole, and in a busy queue other orders of a third
# or two thirds of the mirror's size come and go while it rests (smaller ones are the
# mirror's in proportion to its share of the level)
MIRROR_WHOLE_CANCEL = 0.9
MIRROR_WAIT_MS = 60_000  # past its rest, a mirror waits this long at most for the pair's next event
FLIP_MAX_EXECUTED = 0.2  # share of the order executed before the pull
REFRESH_MS = 400  # a same-side re-add of >= half the size this soon after the pull: quote refresh
MIRROR_MAX_DIST_SCALED = 1.5
# the mirror is new depth on the other side: an add there that the same update took off that
# side's other prices, at least MIRROR_MOVED_SHARE of it in cancels of >= MIRROR_MOVED_PIECE of
# the add each, is a quote re-priced (a market maker following the fair value), which was
# resting on that side already and was not flipped to it
MIRROR_MOVED_SHARE = 0.8
MIRROR_MOVED_PIECE = 0.25
# ... counting only cancels within this many scaled ticks of the touch: a quote re-priced
# follows the fair value along the side's near prices, while a patient order far down the
# side pulled in the same (netted) update is not the add's quote moving
MIRROR_MOVED_MAX_DIST_SCALED = 60.0
FLIP_MAX_OTHERS_PULLED = 1.0  # the side's other levels losing this share of the order with it: vacuuming
# ... and at least this share of the side's median top-10 depth (less is the book's own flow, not a vacuum)
FLIP_VETO_OTHERS_OF_DEPTH10 = 0.3
FLIP_VETO_BEFORE_MS = 700  # counted from this long before the pull
FLIP_MAX_PULL_DIST_SCALED = 60.0  # the spoof may push price away from itself, but not this far


class _Watch:
    __slots__ = ("rec", "t_pull", "deadline", "burst_ts", "burst_qty", "taken", "first_taken_ts", "done",
                 "others_pulled", "mirror")

    def __init__(self, rec, t_pull):
        self.rec, self.t_pull, self.deadline = rec, t_pull, t_pull + FLIP_WINDOW_MS
        self.burst_ts = None  # the millisecond of the taker order being summed, and its quantity so far
        self.burst_qty = 0.0
        self.taken = 0.0  # the large taker orders before it, summed, and the first one's millisecond
        self.first_taken_ts = None
        self.done = False
        self.others_pulled = 0.0  # cancelled on the side's other top-10 levels around the pull
        self.mirror = None  # a mirror add waiting to show it rests


class _Mirror:
    __slots__ = ("side", "price", "ts", "qty", "cancelled")

    def __init__(self, side, price, ts, qty):
        self.side, self.price, self.ts, self.qty = side, price, ts, qty
        self.cancelled = 0.0


class FlippingDetector:
    def __init__(self) -> None:
        self.watches: list[_Watch] = []

    def reset(self) -> None:
        self.watches.clear()

    def expire(self, ts: int) -> None:
        if self.watches:
            self.watches = [w for w in self.watches if not w.done and w.deadline >= ts]

    def on_pulled(self, eng, rec, ts: int) -> list:
        if rec.dist_scaled > FLIP_MAX_DIST_SCALED + 1e-9 or rec.dist_ticks < -max(1.0, 0.5 * eng.tracker.scale) - 1e-9:
            return []
        if rec.size_ratio < FLIP_MIN_SIZE_RATIO or rec.depth_share_now < FLIP_MIN_DEPTH_SHARE \
                or rec.depth_share < FLIP_MIN_BASELINE_DEPTH_SHARE:
            return []
        if (rec.pull_dist_ticks or 0.0) / eng.tracker.scale > FLIP_MAX_PULL_DIST_SCALED:
            return []  # price had long left the order behind: a stale quote withdrawn
        if not FLIP_MIN_LIFE_MS + eng.tracker.batch_ms <= ts - rec.t_add <= FLIP_MAX_LIFE_MS \
                or rec.executed > FLIP_MAX_EXECUTED * rec.qty:
            return []
        if rec.cancelled < FLIP_MIN_CANCELLED * rec.qty or not rec.withdrawn_at_once(FLIP_MIN_ONE_CANCEL):
            return []
        if eng.ran_over(rec, ts):
            return []  # the whole best level went: price ran through it (a stale quote), no pull
        # other large orders of the side pulled with it, near enough to be layering's layers
        # (a far order pulled meanwhile is neither scheme's layer)
        together = {r.price for r in eng.records[rec.side]
                    if r is not rec and r.price != rec.price and abs(r.t_add - rec.t_add) <= 3000
                    and r.t_pulled is not None and ts - r.t_pulled <= 1000
                    and r.dist_scaled <= LAYER_MAX_DIST_SCALED and r.withdrawn_at_once(FLIP_MIN_ONE_CANCEL)}
        if len(together) >= 2:
            return []  # several large orders pulled together: layers, not a single flipped order
        watch = _Watch(rec, ts)
        watch.others_pulled = eng.vacuuming.cancelled_elsewhere(rec.side, rec.price, ts - FLIP_VETO_BEFORE_MS,
                                                                eng.base.med_depth10[rec.side], rec.qty)
        self.watches.append(watch)
        out = []
        if eng.tracker.batch_ms:
            # a netted feed shows the pull at its batch's end, after the batch's trades. Those
            # printed beyond the order's price came after it left (a taker reaches them only
            # past its level), so they may be the flip already; the others may have come before
            beyond = (lambda p: p < rec.price) if rec.side == "bid" else (lambda p: p > rec.price)
            for trade_ts, side, qty, price in eng.taker_since(ts - eng.tracker.batch_ms):
                if side == rec.side and beyond(price) and not watch.done:
                    out.extend(self._take(eng, watch, trade_ts, qty, ts))
        return out

    def on_trade(self, eng, trade, book_side: str, ts: int) -> list:
        out = []
        for w in self.watches:
            if w.done or w.mirror is not None or w.rec.side != book_side or ts < w.t_pull or ts > w.deadline:
                continue
            out.extend(self._take(eng, w, ts, trade.qty, ts))
        return out

    def _take(self, eng, w, trade_ts: int, qty: float, now: int) -> list:
        """Count one trade against the watched side; the flip's event once the large taker
        orders add up."""
        large = FLIP_MIN_ORDER_TAKER_SECONDS * eng.base.med_taker
        if trade_ts != w.burst_ts:
            if w.burst_qty >= large:  # the previous taker order was large: it counts
                w.taken += w.burst_qty
                w.first_taken_ts = w.burst_ts if w.first_taken_ts is None else w.first_taken_ts
            w.burst_ts, w.burst_qty = trade_ts, 0.0
        w.burst_qty += qty
        if w.burst_qty < large:
            return []
        flipped = w.taken + w.burst_qty
        if flipped < max(FLIP_MIN_FRACTION * w.rec.qty, FLIP_MIN_TAKER_SECONDS * eng.base.med_taker):
            return []
        w.done = True
        if self._vacuumed(eng, w, now):
            return []
        first = w.burst_ts if w.first_taken_ts is None else w.first_taken_ts
        return [self._event(eng, w, now, "aggressive", flipped, first)]

    def poll(self, eng, ts: int) -> list:
        """Emit the mirror flips that rested MIRROR_REST_MS (the engine calls this on every
        event while watches are open, as it does the layering detector's)."""
        out = []
        for w in self.watches:
            m = w.mirror
            if m is None or w.done or ts < m.ts + MIRROR_REST_MS:
                continue
            w.done = True
            out.append(self._event(eng, w, ts, "mirror", m.qty, m.ts))
        return out

    def on_changes(self, eng, changes, ts: int) -> None:
        """Follow the update: mirrors being cancelled, same-side refreshes, mirror adds
        (judged by `poll` once they rested)."""
        if not self.watches:
            return
        scale = eng.tracker.scale
        min_mirror = FLIP_MIN_MIRROR - (NETTED_MIRROR_ALLOWANCE if eng.tracker.batch_ms else 0.0)
        for ch in changes:
            if ch.cancelled > 0:
                for w in self.watches:
                    m = w.mirror
                    if m is not None and not w.done and ch.side == m.side and ch.price == m.price:
                        # the mirror joined a queue: the level's small cancels are mostly others'
                        m.cancelled += cancel_attributed(ch.cancelled, m.qty - m.cancelled, ch.old, MIRROR_WHOLE_CANCEL)
                        if m.cancelled > MIRROR_MAX_CANCELLED * m.qty:
                            w.done = True  # withdrawn before it rested
            if ch.added <= 0:
                continue
            for w in self.watches:
                if w.done or w.mirror is not None or ts < w.t_pull or ts > w.deadline:
                    continue
                rec = w.rec
                if ch.side == rec.side:
                    if (ts - w.t_pull <= REFRESH_MS and ch.added >= 0.5 * rec.qty
                            and ch.dist_ticks <= FLIP_MAX_DIST_SCALED * scale):
                        w.done = True  # re-quoted on the same side: a refresh, not a flip
                    continue
                if rec.depth_share >= FLIP_MIN_MIRROR_DEPTH_SHARE and ch.dist_ticks <= MIRROR_MAX_DIST_SCALED * scale \
                        and ch.added >= min_mirror * rec.qty \
                        and ch.added >= FLIP_MIN_TAKER_SECONDS * eng.base.med_taker \
                        and not self._moved_within_side(changes, ch, scale):
                    if self._vacuumed(eng, w, ts):
                        w.done = True
                        continue
                    w.mirror = _Mirror(ch.side, ch.price, ts, ch.added)
                    # judged once it rested (the first event after MIRROR_REST_MS); kept until then
                    w.deadline = ts + MIRROR_REST_MS + MIRROR_WAIT_MS

    @staticmethod
    def _moved_within_side(changes, add, scale) -> bool:
        """The add is a quote moved along its own side in this update (taken off its other
        prices within MIRROR_MOVED_MAX_DIST_SCALED of the touch, in pieces of >= MIRROR_MOVED_PIECE
        of it, adding up to MIRROR_MOVED_SHARE):
        depth that was there already, not an order flipped to that side."""
        piece = MIRROR_MOVED_PIECE * add.added
        max_dist = MIRROR_MOVED_MAX_DIST_SCALED * scale
        moved = 0.0
        for ch in changes:
            if ch.side == add.side and ch.price != add.price and ch.cancelled >= piece and not ch.scrolled \
                    and ch.dist_ticks <= max_dist:
                moved += ch.cancelled
        return moved >= MIRROR_MOVED_SHARE * add.added

    @staticmethod
    def _vacuumed(eng, w, ts) -> bool:
        """At the flip: other levels of the side were pulled with the order (the side was
        vacuumed, the pull is the vacuum's)."""
        rec = w.rec
        # cancels on the side's other levels not put back, from FLIP_VETO_BEFORE_MS before the
        # pull (counted then) and after it
        usual = eng.base.med_depth10[rec.side]
        others = w.others_pulled + eng.vacuuming.cancelled_elsewhere(rec.side, rec.price, w.t_pull + 1, usual, rec.qty)
        return eng.vacuuming.claims(rec.side, ts) or (
            others >= FLIP_MAX_OTHERS_PULLED * rec.cancelled and others >= FLIP_VETO_OTHERS_OF_DEPTH10 * usual)

    def _event(self, eng, w, ts, mode, flip_qty, flip_first):
        rec = w.rec
        rec.used = True
        cancel_ratio = rec.cancelled / rec.qty if rec.qty else 0.0
        latency = max(0, flip_first - w.t_pull)  # a netted feed may print the flip before it shows the pull
        return eng.make_event(
            "flipping", rec.side, ts, rec.price, [rec], t_collapse=w.t_pull, t_collapse_end=ts,
            extra_collapse={"flip_latency_ms": latency, "flip_qty": round(flip_qty, 12),
                            "flip_mode": mode},
            features={"size_ratio": rec.size_ratio, "cancel_ratio": cancel_ratio,
                      "flip_latency_ms": latency,
                      "flip_fraction": flip_qty / rec.qty if rec.qty else 0.0})
