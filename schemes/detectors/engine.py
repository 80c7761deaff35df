"""DetectorEngine: feeds normalised events through the book tracker and the three scheme
detectors and returns `SchemeEvent`s as soon as a collapse is confirmed. Plain Python.

    engine = DetectorEngine(pair_ref, tick_size=0.01)
    for ev in source.events(pair, a, b):
        for se in engine.feed(ev):
            publish(se.to_dict())          # dedupe on se.key = (scheme, side, build start_ms)

The engine is deterministic: the same event stream gives the same SchemeEvents.
`state()` returns an opaque, picklable snapshot of everything (book, baselines, open
candidates); `DetectorEngine.restore(state)` continues exactly where it stopped, so a
restart neither loses nor repeats events. Without a stored state, warm up by feeding the
last 30 minutes again and drop events whose `key` was already published.
"""

from __future__ import annotations

import pickle
from bisect import bisect_left, bisect_right
from dataclasses import asdict, dataclass, field
from operator import itemgetter

from market.sources.events import BookDelta, BookLost, BookSnapshot, PairRef, Quote, Trade

from .book import BookTracker, LargeAdd, cancel_attributed
from .flipping import FlippingDetector
from .layering import LayeringDetector
from .vacuuming import VacuumingDetector

# A large add: qty >= max(LARGE_LEVEL_MULT x median level size at that distance bucket,
#                         LARGE_DEPTH_SHARE x median top-20 depth of the side)
LARGE_LEVEL_MULT = 3.0
LARGE_DEPTH_SHARE = 0.06
PULLED_SHARE = 0.5  # a large add counts as pulled once this share of it was cancelled
RECORD_TTL_MS = 65_000  # longer than layering's longest hold (LAYER_MAX_HOLD_MS): a record gone is a pull unseen
MOVED_SHARE = 0.8  # re-added on the same side in the same update: a move, not a pull ...
# ... counting the adds of at least this share of the (smallest) pulled order: a moved order
# comes back whole, while a netted batch of a busy book also holds the side's own small adds
MOVED_MIN_PIECE = 0.25
# ... placed among the side's this many best levels: an order re-placed deeper than the book
# anyone reads is withdrawn, not moved
MOVED_MAX_LEVEL = 20
# a taker order passing a level takes this share of what it showed before the batch at least
# (the rest: the level's own cancels within the batch, before the order came)
SWEPT_LEVEL_SHARE = 0.8

# Confidence = 0.95 * sum(w * ramp(feature)) / sum(w), per scheme. Ramps are linear
# between (lo, hi) and clipped to 0..1 (see RAMPS); a feature missing for a scheme has no weight.
CONFIDENCE_WEIGHTS = {
    "layering": {"size_ratio": 0.25, "cancel_ratio": 0.30, "levels": 0.15, "move_sigma": 0.15,
                 "opposite_taker": 0.10, "reversion": 0.05},
    "flipping": {"size_ratio": 0.25, "cancel_ratio": 0.20, "flip_latency_ms": 0.25, "flip_fraction": 0.15,
                 "opposite_taker": 0.10, "move_sigma": 0.05},
    "vacuuming": {"size_ratio": 0.25, "cancel_ratio": 0.25, "removed": 0.20, "move_sigma": 0.20,
                  "reversion": 0.10},
}
RAMPS = {
    "size_ratio": (1.5, 10.0),  # x the typical level (vacuuming: x baseline top-10 depth, 1 .. 3)
    "cancel_ratio": (0.5, 0.95),
    "levels": (1.0, 4.0),
    "move_sigma": (0.0, 2.0),  # |mid move| toward the scheme's direction, in 1 s sigmas
    "opposite_taker": (0.0, 5.0),  # opposite taker qty during the build, in typical taker seconds
    "reversion": (0.0, 1.0),  # share of the build's mid move given back at detection
    "flip_latency_ms": (2500.0, 50.0),  # shorter is more abnormal
    "flip_fraction": (0.1, 1.0),
    "removed": (0.2, 0.8),
}
_VAC_SIZE_RAMP = (1.0, 3.0)
MAX_CONFIDENCE = 0.95


def ramp(x: float, lo: float, hi: float) -> float:
    if hi == lo:
        return 1.0 if x >= hi else 0.0
    v = (x - lo) / (hi - lo)
    return 0.0 if v < 0 else 1.0 if v > 1 else v


def confidence(scheme: str, features: dict) -> float:
    weights = CONFIDENCE_WEIGHTS[scheme]
    tot = acc = 0.0
    for name, w in weights.items():
        if name not in features:
            continue
        lo, hi = _VAC_SIZE_RAMP if (scheme == "vacuuming" and name == "size_ratio") else RAMPS[name]
        acc += w * ramp(features[name], lo, hi)
        tot += w
    return round(MAX_CONFIDENCE * acc / tot, 4) if tot else 0.0


def alert_score(conf: float, removed_share: float, move_sigma: float) -> float:
    """0..100: confidence scaled by how much depth was removed (share of the side's
    top-20 baseline depth) and how far price moved (in 1 s sigmas)."""
    return round(100.0 * conf * (0.5 + 0.25 * ramp(removed_share, 0.0, 1.0) + 0.25 * ramp(move_sigma, 0.0, 3.0)), 1)


DIRECTION = {("layering", "bid"): "up", ("layering", "ask"): "down",
             ("flipping", "bid"): "up", ("flipping", "ask"): "down",
             ("vacuuming", "bid"): "down", ("vacuuming", "ask"): "up"}


@dataclass
class SchemeEvent:
    scheme: str  # layering | flipping | vacuuming
    direction: str  # up | down
    side: str  # bid | ask: where the fake liquidity stood
    ts_ms: int  # detection time (event time of the update that confirmed the collapse)
    price: float  # price of the (nearest) pulled order / the touch of the pulled side
    confidence: float  # 0 .. 0.95
    alert_score: float  # 0 .. 100
    build: dict = field(default_factory=dict)
    collapse: dict = field(default_factory=dict)
    pair: str = ""

    @property
    def key(self) -> tuple:
        """Stable identity for de-duplication: (scheme, side, build start_ms)."""
        return (self.scheme, self.side, self.build.get("start_ms"))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["key"] = list(self.key)
        return d


def _added_at(record: LargeAdd) -> int:
    return record.t_add


class DetectorEngine:
    """Per-pair detector: `feed(event) -> list[SchemeEvent]`."""

    def __init__(self, pair_ref: PairRef, tick_size: float | None = None, distance_scale: float | None = None,
                 batch_ms: int = 0):
        self.pair = pair_ref
        self.tracker = BookTracker(tick_size, distance_scale, batch_ms)
        self.base = self.tracker.base
        self.records: dict[str, list[LargeAdd]] = {"bid": [], "ask": []}
        # The open records by (side, price). Once a second, when records expire, it is
        # what a rebuild from `records` gives: every live record under its price, in order,
        # the prices whose level emptied since included again (`_emptied`). `_all_by_price`
        # holds those lists whatever emptied, so that resync costs the prices that emptied
        # and the records that expired, not every record of the last 45 s.
        self._by_price: dict = {}
        self._all_by_price: dict = {}
        self._emptied: set = set()
        self.flipping = FlippingDetector()
        self.layering = LayeringDetector()
        self.vacuuming = VacuumingDetector()
        self._mid_ts: list[int] = []
        self._mid_px: list[float] = []
        self._taker: list = []  # (ts, book side hit, qty, price)
        self._changes: list = []  # the level changes of the update being read
        self._next_prune = 0
        self.emitted = 0

    # -- public API ------------------------------------------------------------------------
    def feed(self, event) -> list[SchemeEvent]:
        t = type(event)
        if t is BookDelta:
            return self._on_delta(event)
        if t is Trade:
            return self._on_trade(event)
        if t is BookSnapshot:
            self.tracker.on_snapshot(event)
            self._reset_book()
            self._note_mid(event.ts_ms)
            return []
        if t is Quote:
            return []
        if t is BookLost:  # nothing is judged on a book we no longer know; the snapshot restarts it
            self.tracker.clear_book()
            self._reset_book()
            return []
        raise TypeError(f"unknown event {event!r}")

    def feed_many(self, events) -> list[SchemeEvent]:
        out = []
        for ev in events:
            r = self.feed(ev)
            if r:
                out.extend(r)
        return out

    # Raised whenever the engine's or a detector's fields change: a checkpoint written by
    # another version is refused (the caller warms up instead) rather than restored into
    # objects missing a field.
    STATE_VERSION = 10

    def state(self) -> bytes:
        """Opaque snapshot of the whole engine (pickle); see `restore`."""
        return pickle.dumps((self.STATE_VERSION, self), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, state: bytes) -> "DetectorEngine":
        loaded = pickle.loads(state)
        if not (isinstance(loaded, tuple) and len(loaded) == 2 and loaded[0] == cls.STATE_VERSION
                and isinstance(loaded[1], cls)):
            raise TypeError("not a DetectorEngine state of this version")
        return loaded[1]

    @property
    def book_updates(self) -> int:
        return self.tracker.updates

    # -- internals -------------------------------------------------------------------------
    def _reset_book(self) -> None:
        # a snapshot replaces the book: open candidates cannot be followed across it
        self.records = {"bid": [], "ask": []}
        self._by_price.clear()
        self._all_by_price.clear()
        self._emptied.clear()
        self.flipping.reset()
        self.vacuuming.reset()
        self.layering.reset()

    def _note_mid(self, ts: int) -> None:
        m = self.tracker.mid()
        if m is not None and (not self._mid_px or self._mid_px[-1] != m):
            self._mid_ts.append(ts)
            self._mid_px.append(m)

    def mid_at(self, ts: int) -> float | None:
        i = bisect_right(self._mid_ts, ts) - 1
        if i < 0:
            return self._mid_px[0] if self._mid_px else None
        return self._mid_px[i]

    def vacuum_active(self, side: str, ts: int) -> bool:
        return self.vacuuming.active(side, ts, self.base.med_depth10[side])

    def large_threshold(self, side: str, dist_ticks: float) -> float:
        base = self.base
        ds = dist_ticks / self.tracker.scale if dist_ticks > 0 else 0.0
        return max(LARGE_LEVEL_MULT * base.level_median(ds), LARGE_DEPTH_SHARE * base.med_depth20[side])

    def _prune(self, ts: int) -> None:
        self._next_prune = ts + 1000
        lim = ts - RECORD_TTL_MS
        expired = False
        all_by_price = self._all_by_price
        for side in ("bid", "ask"):
            recs = self.records[side]
            if recs and recs[0].t_add < lim:
                # records are appended in time order: the expired ones are a prefix, and the
                # first of each price's list
                gone = bisect_left(recs, lim, key=_added_at)
                for r in recs[:gone]:
                    key = (side, r.price)
                    same = all_by_price[key]
                    del same[0]
                    if not same:
                        del all_by_price[key]
                        self._emptied.add(key)
                self.records[side] = recs[gone:]
                expired = True
        if expired or not self._by_price:  # (an empty index was rebuilt from the records too)
            by_price = self._by_price
            for key in self._emptied:
                same = all_by_price.get(key)
                if same is None:
                    by_price.pop(key, None)
                else:
                    by_price[key] = same
            self._emptied.clear()
        if len(self._mid_ts) > 4000:
            lim2 = ts - 60_000
            i = bisect_left(self._mid_ts, lim2)
            del self._mid_ts[:i]
            del self._mid_px[:i]
        if self._taker and self._taker[0][0] < ts - 30_000:
            # trades are appended in time order: the expired ones are a prefix
            del self._taker[:bisect_left(self._taker, ts - 30_000, key=itemgetter(0))]
        self.flipping.expire(ts)

    def taker_since(self, ts: int) -> list:
        """The trades (ts, book side hit, qty, price) printed since ts, oldest first."""
        taker = self._taker
        i = len(taker)
        while i and taker[i - 1][0] >= ts:
            i -= 1
        return taker[i:]

    def ran_over(self, rec, ts: int) -> bool:
        """The order's pull took the whole best level away after price had come to it (it
        was added behind the touch): price ran through a stale level, no pull. Except on a
        netted feed when one taker order (the prints of one millisecond) of the pull's batch
        printed against the side both ahead of the order's price and beyond it, taking the
        levels ahead whole: it went past that price without taking the order, so the order
        had been withdrawn before price came to it (the sweep that followed arrived in the
        same batch and emptied the levels in front). A matching engine fills a level before
        the next; prints of a fraction of the levels in front are price jumping over stale
        quotes, mostly cancelled and partly traded, which says nothing of the order's turn."""
        if not rec.pull_emptied_touch or rec.dist_ticks <= 0:
            return False
        if not self.tracker.batch_ms:
            return True
        price = rec.price
        sign = 1.0 if rec.side == "bid" else -1.0  # > 0: ahead of the order (nearer the other side)
        ahead: dict = {}  # millisecond -> {price: quantity} printed ahead of the order
        beyond: set = set()  # the milliseconds that printed past it
        for trade_ts, side, qty, px in self.taker_since(ts - self.tracker.batch_ms):
            if side != rec.side or trade_ts > ts:
                continue
            d = sign * (px - price)
            if d > 0:
                printed = ahead.setdefault(trade_ts, {})
                printed[px] = printed.get(px, 0.0) + qty
            elif d < 0:
                beyond.add(trade_ts)
        return not any(ms in beyond and self._took_whole(rec.side, printed) for ms, printed in ahead.items())

    def _took_whole(self, side: str, printed: dict) -> bool:
        """The prints (price -> quantity) took SWEPT_LEVEL_SHARE of what their levels showed
        before the batch being read."""
        shown = sum(ch.old for ch in self._changes if ch.side == side and ch.price in printed)
        return sum(printed.values()) >= SWEPT_LEVEL_SHARE * shown - 1e-12

    def _on_trade(self, trade) -> list:
        side = self.tracker.on_trade(trade)
        self._taker.append((trade.ts_ms, side, trade.qty, trade.price))
        out = self.layering.poll(self, trade.ts_ms) if self.layering.pending or self.layering.awaiting else []
        if self.flipping.watches:
            out.extend(self.flipping.poll(self, trade.ts_ms))
            out.extend(self.flipping.on_trade(self, trade, side, trade.ts_ms))
        return out

    def _on_delta(self, delta) -> list:
        ts = delta.ts_ms
        tr = self.tracker
        changes = tr.on_delta(delta)
        self._changes = changes
        if ts >= self._next_prune:
            self._prune(ts)
        self._note_mid(ts)
        if not changes:
            out = self.layering.poll(self, ts) if self.layering.pending or self.layering.awaiting else []
            if self.flipping.watches:
                out.extend(self.flipping.poll(self, ts))
            return out
        pulled = []
        base = self.base
        scale = tr.scale
        by_price = self._by_price
        for ch in changes:
            if ch.added > 0:
                ds = ch.dist_ticks / scale if ch.dist_ticks > 0 else 0.0
                med = base.level_median(ds)
                if med <= 0:
                    continue
                thr = max(LARGE_LEVEL_MULT * med, LARGE_DEPTH_SHARE * base.med_depth20[ch.side])
                if ch.added >= thr:
                    share = ch.added / base.med_depth20[ch.side] if base.med_depth20[ch.side] else 0.0
                    now20 = tr.top_depth(ch.side, 20) - ch.added
                    rec = LargeAdd(ch.side, ch.price, ts, ch.added, ch.old, ch.dist_ticks, ds, ch.added / med, share,
                                   ch.added / now20 if now20 > 0 else share)
                    # the same reading as flipping's mirror: taken off the side's other near prices
                    rec.moved_in = FlippingDetector._moved_within_side(changes, ch, scale)
                    self.records[ch.side].append(rec)
                    key = (ch.side, ch.price)
                    same = self._all_by_price.get(key)
                    if same is None:
                        same = self._all_by_price[key] = []
                        self._emptied.add(key)
                    same.append(rec)
                    if key in self._emptied:  # its list here is not the live records' list
                        by_price.setdefault(key, []).append(rec)
                continue
            recs = by_price.get((ch.side, ch.price))
            if not recs:
                continue
            ex, canc = ch.executed, ch.cancelled
            total_rem = sum(r.remaining for r in recs)
            background_runover = ch.runover and total_rem < 0.8 * ch.old
            for r in recs:
                if r.closed:
                    continue
                if ex > 0:
                    take = min(ex, r.ahead)
                    r.ahead -= take
                    ex -= take
                    take = min(ex, r.remaining)
                    r.executed += take
                    ex -= take
                if canc > 0 and not background_runover and not ch.scrolled:
                    take = cancel_attributed(canc, r.remaining, ch.old)
                    if take > 0:
                        r.cancelled += take
                        if take > r.largest_cancel:
                            r.largest_cancel = take
                        canc -= take
                        if r.t_first_cancel is None:
                            r.t_first_cancel = ts
                        if r.t_pulled is None and r.cancelled >= PULLED_SHARE * r.qty:
                            r.t_pulled = ts
                            r.pull_dist_ticks = ch.dist_ticks
                            r.pull_emptied_touch = ch.runover
                            pulled.append(r)
                if ch.new <= 0:
                    r.closed = True
            if ch.new <= 0:
                del by_price[(ch.side, ch.price)]
                self._emptied.add((ch.side, ch.price))
        if pulled:
            pulled = self._without_moves(pulled, changes)
        out = []
        if self.layering.pending or self.layering.awaiting:
            out.extend(self.layering.poll(self, ts))
        out.extend(self.vacuuming.on_changes(self, changes, ts))
        for r in pulled:
            if r.used:
                continue
            out.extend(self.layering.on_pulled(self, r, ts))
            out.extend(self.flipping.on_pulled(self, r, ts))
        if self.flipping.watches:
            self.flipping.on_changes(self, changes, ts)
            out.extend(self.flipping.poll(self, ts))
        return out

    @staticmethod
    def _without_moves(pulled: list, changes) -> list:
        """Drop the pulls that were moves: when the same update adds at least
        MOVED_SHARE of the pulled quantity back on the same side, in pieces of at least
        MOVED_MIN_PIECE of a pulled order, the orders were re-priced (a peg following the
        touch, a quote refresh), not withdrawn. The moved orders are spent; their new places
        are new large adds."""
        keep = []
        for side in ("bid", "ask"):
            mine = [r for r in pulled if r.side == side]
            if not mine:
                continue
            piece = max(MOVED_MIN_PIECE * min(r.cancelled for r in mine), 1e-12)
            added = sum(ch.added for ch in changes
                        if ch.side == side and ch.added >= piece and ch.level_index < MOVED_MAX_LEVEL)
            if added >= MOVED_SHARE * sum(r.cancelled for r in mine):
                for r in mine:
                    r.used = True
            else:
                keep.extend(mine)
        return keep

    # -- event building --------------------------------------------------------------------
    def make_event(self, scheme, side, ts, price, recs, *, t_collapse, t_collapse_end, build_start=None,
                   build_end=None, extra_build=None, extra_collapse=None, features=None) -> SchemeEvent:
        tr, base = self.tracker, self.base
        tick = tr.tick or 1.0
        features = dict(features or {})
        if recs:
            b_start = min(r.t_add for r in recs) if build_start is None else build_start
            b_end = max(r.t_add for r in recs) if build_end is None else build_end
        else:
            b_start = build_start if build_start is not None else ts
            b_end = build_end if build_end is not None else ts
        added = sum(r.qty for r in recs)
        canc = sum(r.cancelled for r in recs)
        ex = sum(r.executed for r in recs)
        mid0 = self.mid_at(b_start - 1) or self.tracker.mid() or price
        mid_b = self.mid_at(b_end) or mid0
        mid_peak = self.mid_at(t_collapse) or mid_b
        mid_now = tr.mid() or mid_peak
        sign = 1.0 if DIRECTION[(scheme, side)] == "up" else -1.0
        sig = base.sigma_ret or 1e-4
        build_move_bps = (mid_peak / mid0 - 1.0) * 1e4 if mid0 else 0.0
        collapse_move_bps = (mid_now / mid_peak - 1.0) * 1e4 if mid_peak else 0.0
        move_sigma = max(0.0, sign * (mid_now / mid0 - 1.0)) / sig if mid0 else 0.0
        if scheme == "vacuuming":
            move_sigma = max(0.0, sign * collapse_move_bps * 1e-4) / sig
        reversion = 0.0
        if abs(build_move_bps) > 1e-9:
            reversion = max(0.0, min(1.0, -collapse_move_bps / build_move_bps))
        opp_book = side  # a bid spoof sets up sells: they hit the bid
        opp_qty = sum(q for t, s, q, _ in self._taker if b_start <= t <= ts and s == opp_book)
        features.setdefault("move_sigma", move_sigma)
        features.setdefault("reversion", reversion)
        if base.med_taker > 0:
            features.setdefault("opposite_taker", opp_qty / base.med_taker)
        conf = confidence(scheme, features)
        depth20 = base.med_depth20[side] or 1.0
        if scheme == "vacuuming":  # the side's depth, not the large orders in it
            removed_qty = extra_collapse["depth_before_qty"] - extra_collapse["depth_after_qty"]
        else:
            removed_qty = canc
        score = alert_score(conf, removed_qty / depth20, abs(collapse_move_bps + build_move_bps) * 1e-4 / sig)
        mid_ref = mid0 or price
        dists = [r.dist_ticks for r in recs]
        levels = sorted({r.price for r in recs})
        d10 = base.med_depth10[side] or 1.0
        build = {
            "start_ms": int(b_start), "end_ms": int(b_end), "duration_ms": int(b_end - b_start),
            "added_qty": round(added, 12), "added_notional": round(sum(r.qty * r.price for r in recs), 6),
            "levels": len(levels),
            "distance_ticks_min": round(min(dists), 2) if dists else 0.0,
            "distance_ticks_max": round(max(dists), 2) if dists else 0.0,
            "distance_bps_min": round(min(dists) * tick / mid_ref * 1e4, 3) if dists else 0.0,
            "distance_bps_max": round(max(dists) * tick / mid_ref * 1e4, 3) if dists else 0.0,
            "size_ratio": round(features.get("size_ratio", 0.0), 3),
            "depth_share": round(added / depth20, 4) if recs else round(features.get("size_ratio", 0.0) - 1.0, 4),
            "imbalance_before": round(self._imbalance_at_baseline(), 4),
            "imbalance_peak": round(self._imbalance_peak(side, added, d10, features), 4),
            "opposite_taker_qty": round(opp_qty, 12),
            "mid_move_bps": round(build_move_bps, 3),
            "distance_scale_ticks": round(tr.scale, 3),
        }
        if extra_build:
            build.update(extra_build)
        pull_d = [r.pull_dist_ticks for r in recs if r.pull_dist_ticks is not None]
        collapse = {
            "start_ms": int(t_collapse), "end_ms": int(t_collapse_end), "duration_ms": int(t_collapse_end - t_collapse),
            "cancelled_qty": round(canc, 12), "executed_qty": round(ex, 12),
            "cancel_ratio": round(canc / (canc + ex), 4) if canc + ex else 1.0,
            "removed_fraction": round((canc + ex) / added, 4) if added else 0.0,
            "time_to_cancel_ms": int(t_collapse - b_end),
            "distance_to_touch_ticks": round(min(pull_d), 2) if pull_d else 0.0,
            "depth_drop": round(removed_qty / depth20, 4),
            "mid_move_bps": round(collapse_move_bps, 3),
            "reversion": round(reversion, 4),
        }
        if extra_collapse:
            collapse.update(extra_collapse)
        self.emitted += 1
        return SchemeEvent(scheme, DIRECTION[(scheme, side)], side, int(ts), float(price), conf, score,
                           build, collapse, f"{self.pair.exchange}/{self.pair.base}/{self.pair.quote}")

    def _imbalance_at_baseline(self) -> float:
        b, a = self.base.med_depth10["bid"], self.base.med_depth10["ask"]
        return (b - a) / (b + a) if a + b else 0.0

    def _imbalance_peak(self, side, added, d10, features) -> float:
        b, a = self.base.med_depth10["bid"], self.base.med_depth10["ask"]
        extra = added if added else max(0.0, features.get("size_ratio", 1.0) - 1.0) * d10
        if side == "bid":
            b += extra
        else:
            a += extra
        return (b - a) / (b + a) if a + b else 0.0
