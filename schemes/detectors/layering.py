"""Layering: several large orders placed on one side behind the touch within a few
seconds, then cancelled (mostly unexecuted) together. Plain Python; driven by
`DetectorEngine`.

A pulled large order opens (or joins) the side's pending collapse; the collapse is judged
once no layer was pulled for LAYER_QUIET_MS, so every layer of it is counted before the
event is emitted (about LAYER_QUIET_MS after the last cancel). Two readings of DETECTION.md's
"removed within 60 s, mostly in one 1 s cluster" keep a collapse open past that:
- a cluster still inside its LAYER_PULL_MS that has too few layers yet waits for the rest of
  it (a spoofer pulling in groups a few hundred ms apart pulls one cluster);
- a cluster that took most (LAYER_MIN_CLUSTER_REMOVED) but not LAYER_MIN_REMOVED of the
  layers waits, up to LAYER_MAX_HOLD_MS from their add, for the rest to be cancelled, and is
  emitted when it is (its tail)."""

from __future__ import annotations

LAYER_MIN_LEVELS = 3  # distinct prices with a large add that was pulled
LAYER_MIN_BEHIND = 2  # of them standing LAYER_MIN_DIST..LAYER_MAX_DIST scaled ticks behind the touch
LAYER_MIN_DIST_SCALED = 0.5  # >= 1 scaled tick behind the touch (less rounding) ...
LAYER_MAX_DIST_SCALED = 26.0  # ... and <= 25
LAYER_BUILD_MS = 3_500  # the layers were added within 3 s (plus the time one update takes)
LAYER_PULL_MS = 1_500  # and pulled within one cluster of about a second
LAYER_QUIET_MS = 600  # no further pull for this long: the collapse is over
LAYER_MAX_HOLD_MS = 63_500  # add -> pull: collapsed within 60 s of a build of up to LAYER_BUILD_MS
LAYER_MIN_REMOVED = 0.7  # cancelled share of the layers' quantity (within LAYER_MAX_HOLD_MS) ...
LAYER_MIN_CLUSTER_REMOVED = 0.5  # ... most of it in the cluster
LAYER_MAX_EXECUTED = 0.1  # executed share of the layers' quantity
LAYER_MIN_SIZE_RATIO = 6.0  # the layers' size-weighted mean x the typical level (5 x, less noise)
LAYER_MIN_DEPTH_SHARE = 0.5  # together at least this share of the side's top-20 depth
LAYER_MIN_ONE_CANCEL = 0.5  # a layer counts once half of it went in one cancel (pulled, not worn down)
LAYER_MAX_PULL_DIST_SCALED = 60.0  # a cluster awaiting removal: its nearest layer this far behind the touch at most
LAYER_MIN_STOOD_MS = 1_000  # all the layers stood in view together this long before the first was pulled


_TOO_FEW, _REJECTED, _AWAITING = "too few layers", "rejected", "awaiting removal"


class _Collapse:
    __slots__ = ("recs", "first_pull", "last_pull", "layers", "qty")

    def __init__(self, rec, ts):
        self.recs = [rec]
        self.first_pull = self.last_pull = ts
        self.layers: list = []  # once it awaits removal: its layers and their quantity
        self.qty = 0.0


class LayeringDetector:
    def __init__(self) -> None:
        self.pending: dict[str, _Collapse] = {}
        self.awaiting: list[_Collapse] = []  # clusters that took most of their layers, awaiting the rest

    def reset(self) -> None:
        self.pending.clear()
        self.awaiting.clear()

    def on_pulled(self, eng, rec, ts: int) -> list:
        """A large order was (mostly) cancelled: remember it; returns events of a collapse
        this pull closes on the same side."""
        # a quote re-priced along its side is depth that rested there already (a market maker's
        # ladder following the price), not an order placed: layers are placed
        if rec.used or rec.moved_in or rec.dist_scaled > LAYER_MAX_DIST_SCALED or rec.dist_ticks < -0.5:
            return []
        if not rec.withdrawn_at_once(LAYER_MIN_ONE_CANCEL) or eng.ran_over(rec, ts):
            return []  # worn down, or price came to it and ran through its level
        if ts - rec.t_add > LAYER_MAX_HOLD_MS:
            return []
        out = []
        col = self.pending.get(rec.side)
        if col is not None and ts - col.first_pull > LAYER_PULL_MS:
            done = self.pending.pop(rec.side)
            verdict, out = self._judge(eng, done, ts)
            if verdict == _AWAITING:
                self.awaiting.append(done)
            col = None
        if col is None:
            self.pending[rec.side] = _Collapse(rec, ts)
        else:
            col.recs.append(rec)
            col.last_pull = ts
        return out

    def poll(self, eng, ts: int) -> list:
        out = []
        for side in [s for s, c in self.pending.items() if ts - c.last_pull > LAYER_QUIET_MS]:
            col = self.pending[side]
            verdict, events = self._judge(eng, col, ts)
            if verdict == _TOO_FEW and ts - col.first_pull <= LAYER_PULL_MS:
                continue  # the rest of the cluster may still come
            del self.pending[side]
            if verdict == _AWAITING:
                self.awaiting.append(col)
            out.extend(events)
        if self.awaiting:
            out.extend(self._removed(eng, ts))
        return out

    def _removed(self, eng, ts: int) -> list:
        """Emit the awaiting clusters whose layers are now removed; drop those past their hold
        or run over (executed)."""
        out, still = [], []
        for col in self.awaiting:
            recs = col.recs
            if any(r.used for r in recs):
                continue
            if sum(r.executed for r in recs) > LAYER_MAX_EXECUTED * col.qty:
                continue
            if sum(r.cancelled for r in recs) >= LAYER_MIN_REMOVED * col.qty:
                out.append(self._event(eng, col, col.layers, ts, ts))
            elif ts - min(r.t_add for r in recs) <= LAYER_MAX_HOLD_MS:
                still.append(col)
        self.awaiting = still
        return out

    def _judge(self, eng, col: _Collapse, ts: int) -> tuple[str, list]:
        """The collapse's verdict and, when it is layering that completed, its event."""
        recs = _built_together([r for r in col.recs if not r.used])
        by_price = {}
        for r in recs:
            if r.price not in by_price or r.qty > by_price[r.price].qty:
                by_price[r.price] = r
        layers = list(by_price.values())
        if len(layers) < LAYER_MIN_LEVELS:
            return _TOO_FEW, []
        behind = [r for r in layers if LAYER_MIN_DIST_SCALED <= r.dist_scaled <= LAYER_MAX_DIST_SCALED]
        if len(behind) < LAYER_MIN_BEHIND or min(r.dist_scaled for r in layers) < LAYER_MIN_DIST_SCALED:
            return _REJECTED, []  # orders at the touch: the shape of flipping or vacuuming, not of layers
        if min(r.t_pulled for r in recs) - max(r.t_add for r in recs) < LAYER_MIN_STOOD_MS:
            return _REJECTED, []  # a ladder placed and taken away again: never shown as a whole
        layer_qty = sum(r.qty for r in layers)
        if sum(r.size_ratio * r.qty for r in layers) < LAYER_MIN_SIZE_RATIO * layer_qty or \
                sum(r.depth_share for r in layers) < LAYER_MIN_DEPTH_SHARE:
            return _REJECTED, []
        qty = sum(r.qty for r in recs)
        canc = sum(r.cancelled for r in recs)
        ex = sum(r.executed for r in recs)
        if ex > LAYER_MAX_EXECUTED * qty or canc < LAYER_MIN_CLUSTER_REMOVED * qty:
            return _REJECTED, []
        other = "ask" if recs[0].side == "bid" else "bid"
        # the other side's large orders withdrawn with the layers, placed with them or while
        # they stood: orders that stood there long before are another trader's or the book's
        built_from, built_to = min(r.t_add for r in recs) - LAYER_BUILD_MS, col.first_pull
        other_pulled = [r for r in eng.records[other]
                        if r.t_pulled is not None and abs(r.t_pulled - col.first_pull) <= LAYER_PULL_MS
                        and built_from <= r.t_add <= built_to]
        if len({r.price for r in other_pulled}) >= 2 and sum(r.cancelled for r in other_pulled) >= 0.5 * canc:
            return _REJECTED, []  # both sides pulled together: a two-sided withdrawal
        col.recs, col.layers, col.qty = recs, layers, qty
        if canc < LAYER_MIN_REMOVED * qty:
            if min(r.pull_dist_ticks or 0.0 for r in layers) / eng.tracker.scale > LAYER_MAX_PULL_DIST_SCALED:
                return _REJECTED, []  # price had long left the ladder behind: stale orders withdrawn
            return _AWAITING, []
        return "layering", [self._event(eng, col, layers, ts, col.last_pull)]

    @staticmethod
    def _event(eng, col: _Collapse, layers: list, ts: int, t_collapse_end: int):
        recs = col.recs
        qty = sum(r.qty for r in recs)
        canc = sum(r.cancelled for r in recs)
        for r in recs:
            r.used = True
        size_ratio = sum(r.size_ratio * r.qty for r in layers) / sum(r.qty for r in layers)
        best = min(layers, key=lambda r: r.dist_ticks)
        return eng.make_event(
            "layering", best.side, ts, best.price, recs,
            t_collapse=col.first_pull, t_collapse_end=t_collapse_end,
            features={"size_ratio": size_ratio, "cancel_ratio": canc / qty if qty else 0.0,
                      "levels": len(layers)})


def _built_together(recs: list) -> list:
    """The largest group of the pulled orders added within LAYER_BUILD_MS of each other
    (an unrelated large order pulled in the same second does not spoil the layers)."""
    recs = sorted(recs, key=lambda r: r.t_add)
    best: list = []
    j = 0
    for i in range(len(recs)):
        while recs[i].t_add - recs[j].t_add > LAYER_BUILD_MS:
            j += 1
        if i + 1 - j > len(best):
            best = recs[j:i + 1]
    return best
