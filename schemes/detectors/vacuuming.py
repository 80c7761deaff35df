"""Vacuuming (our own definition; no regulator defines the word): depth on one side that
had been unusually large for a while is pulled within about a second or two, mostly
unexecuted, while the other side stays, leaving a gap price can move into. Plain Python;
driven by `DetectorEngine`."""

from __future__ import annotations

import math
from collections import deque

VAC_ELEVATED = 1.2  # top-10 depth >= this x its 30-minute median counts as elevated
VAC_PEAK = 1.25  # the peak before the pull >= this x baseline (1.5 less measuring noise)
VAC_MIN_REST_MS = 1_500  # elevated at least this long before the pull (2 s less the build's ramp)
VAC_MAX_REST_MS = 45_000  # longer-lived walls are patient orders, not vacuuming
VAC_WINDOW_MS = 700  # the pull happens within this window (the peak and every cancel are at most this old)
VAC_DROP_OF_EXCESS = 0.5  # depth falls by >= this share of the excess over baseline ...
VAC_MIN_DROP = 0.6  # ... and by >= this share of the baseline (measured when the last cancel came)
VAC_MOVE_MS = 5_000  # then the mid moves into the gap within this time ...
VAC_MOVE_SIGMA = 0.5  # ... by >= max(1 tick, this many sigmas of the mid's move over VAC_MOVE_MS
VAC_MOVE_HORIZON = math.sqrt(VAC_MOVE_MS / 1000)  # (1 s sigmas x this): a random walk wanders 0.5
# one-second sigmas within 5 s four times in five, so that alone says nothing about a gap)
VAC_MIN_CANCELLED = 0.6  # cancelled in the pull >= this share of the side's baseline top-10 depth
VAC_MIN_CANCELS = 3  # in at least this many cancels
VAC_CANCEL_SHARE = 0.5  # cancelled (not run over) share of the drop
VAC_MAX_EXECUTED = 0.2  # executed / (executed + cancelled): above it is a sweep
VAC_MAX_READDED = 0.5  # added to the side's ten best levels while the pull went on, share of the cancelled
VAC_OTHER_SIDE = 0.2  # the other side may not lose this share of its depth (two-sided pull): to cancels
# it did not put back on its ten best levels, or to cancels alone while it stands elevated ...
VAC_OTHER_SIDE_MS = 1_000  # ... within this time of the peak (later cancels there are the book's own flow)
VAC_OTHER_FROM_MS = 500  # ... counted from this long before the peak
VAC_OTHER_DEEPER = 1.6  # the other side's top-10 depth x its median >= this x the pulled side's: no one-sided depth
VAC_OTHER_ELEVATED = 2.0  # (elevated: its top-10 depth >= this x its median; it withdraws too)
VAC_MIN_RESTED = 0.2  # what the pull took that had rested >= this share of what it cancelled, ...
VAC_FRESH_MOVE_SIGMA = 2.0  # ... else price must move this many one-second sigmas into the gap ...
VAC_FRESH_MOVE_MS = 1_000  # ... within this time
VAC_COOLDOWN_MS = 5_000
VAC_PULL_END = 0.95  # the pull ended once this share of its cancelled quantity was gone
VAC_LAYER_SHAPED_MOVE_MS = 1_000  # a pull with layering's shape is ours if price moves into the gap this soon
VAC_BEFORE_MS = 10_000  # the depth before the elevation: its lowest in this span
VAC_MIN_LEVELS = 3  # the pulled depth stood on at least this many levels ...
VAC_MAX_CANCEL_SHARE = 0.35  # ... and no single cancel took more than this share of it,
# on a netted feed (a batch nets every order pulled at a price in it) twice an even share of
# the levels that carried the pull (each >= VAC_CARRYING_SHARE of it), when >= 3 did, up to:
VAC_NETTED_CANCEL_SHARE = 0.5
VAC_CARRYING_SHARE = 0.1
VAC_MIN_BUILT = 0.85  # the build's growth of the side's ten best levels >= this share of the peak's excess
VAC_MAX_PULLED_OF_BUILT = 1.25  # the pull cancelled at most this x the build's growth


def _pull_span(flow, since_ms: int) -> tuple[int, int | None, int | None]:
    """The cancels in `flow` ((ts, cancelled, executed, price), in time order) from since_ms:
    how many, the first one's time and the time by which VAC_PULL_END of their quantity was
    gone. A straggler's small cancel later does not stretch the pull over the book's own
    refill of the gap, which would then read as depth put back."""
    cancels = [(t, c) for t, c, _, _ in flow if t >= since_ms and c > 0]
    if not cancels:
        return 0, None, None
    total = sum(c for _, c in cancels)
    running = 0.0
    for t, c in cancels:
        running += c
        if running >= VAC_PULL_END * total - 1e-12:
            return len(cancels), cancels[0][0], t
    return len(cancels), cancels[0][0], cancels[-1][0]


def _max_cancel_share(cancelled_by_level: dict, cancelled: float, batch_ms: int) -> float:
    """The largest share of a pull one cancel may take (see VAC_MAX_CANCEL_SHARE)."""
    if not batch_ms:
        return VAC_MAX_CANCEL_SHARE
    carrying = sum(1 for c in cancelled_by_level.values() if c >= VAC_CARRYING_SHARE * cancelled)
    if carrying < VAC_MIN_LEVELS:
        return VAC_MAX_CANCEL_SHARE
    return min(VAC_NETTED_CANCEL_SHARE, max(VAC_MAX_CANCEL_SHARE, 2.0 / carrying))


class _Side:
    __slots__ = ("hist", "flow", "elev_start", "elev_end", "cooldown", "last_event_ts", "peak_start", "slow",
                 "before_elevation", "cancelled_total", "adds", "seen_top", "top")

    def __init__(self):
        self.hist = deque()  # (ts, top-10 depth)
        self.slow = deque()  # (ts, top-10 depth) every ~250 ms over the last VAC_BEFORE_MS
        self.before_elevation = None  # the lowest depth in the VAC_BEFORE_MS before the elevation began
        self.cancelled_total = 0.0  # all cancels in the top 10 levels (see `top`) so far
        self.flow = deque()  # (ts, cancelled, executed, price) in the top 10 levels, or pushed out of them
        self.adds = deque()  # (ts, price, quantity change, distance in ticks) of the top 10 levels
        # the prices of the side's ten best levels, and price -> until when it stood among them:
        # a level that new small levels in front pushed out is still the depth the peak showed
        self.top: tuple = ()
        self.seen_top: dict = {}
        self.elev_start = None
        self.elev_end = None
        self.cooldown = 0
        self.last_event_ts = -10**18

    def withdrew(self, cancelled: float, since_ms: int, depth: float, elevated: bool) -> bool:
        """The side lost VAC_OTHER_SIDE of its depth since since_ms to cancels it did not put
        back on its ten best levels: market makers re-quote a side as price moves (what they
        cancel at one price they place at another) and the side stays. While the side stood
        elevated itself, every cancel counts: a side showing unusual depth that cancels is
        withdrawing too, however much is placed there meanwhile."""
        return depth > 0 and self.not_put_back(cancelled, since_ms, elevated) > VAC_OTHER_SIDE * depth

    def not_put_back(self, cancelled: float, since_ms: int, elevated: bool, except_price: float | None = None) -> float:
        """Of `cancelled` (since since_ms), what was not added back to the side's ten best
        levels (other than except_price) meanwhile; all of it while the side is elevated."""
        if elevated:
            return cancelled
        added = 0.0
        for t, price, change, _ in reversed(self.adds):  # in time order: stop at since_ms
            if t < since_ms:
                break
            if change > 0 and price != except_price:
                added += change
        return max(0.0, cancelled - added)


class _Pending:
    """A pull that met every test but the last: price has to move into the gap."""

    __slots__ = ("side", "deadline", "mid0", "args", "other_cancelled_from", "other_depth", "watch_other_until",
                 "deferred", "other_from_ts", "move_sigma", "other_elevated")

    def __init__(self, side, deadline, mid0, args, other_cancelled_from, other_depth, watch_other_until, deferred,
                 other_from_ts, move_sigma, other_elevated):
        self.side, self.deadline, self.mid0, self.args = side, deadline, mid0, args
        self.move_sigma = move_sigma  # the move into the gap it needs, in sigmas of 1 s mid returns
        self.watch_other_until = watch_other_until
        # layering's shape: its large orders stay free for layering until the move confirms us
        self.deferred = deferred
        # the other side's cancel total before the pull, and its depth: if it is pulled
        # too while we wait for the move, it was a two-sided withdrawal
        self.other_cancelled_from, self.other_depth = other_cancelled_from, other_depth
        self.other_from_ts = other_from_ts  # when other_cancelled_from was the other side's total
        self.other_elevated = other_elevated


def _build_fields(changes: list, eng, side: str, touch: float) -> dict:
    """The build as the orders that made it: the levels among the side's ten best whose
    quantity grew over the build (net of what was cancelled or traded there meanwhile, so
    a market maker re-quoting the same level over and over counts once), how much they
    grew, how far from the touch they stood."""
    net: dict[float, list] = {}  # price -> [net change, distance at its last change]
    for _, price, change, dist in changes:
        entry = net.setdefault(price, [0.0, dist])
        entry[0] += change
        entry[1] = dist
    grown = [(price, qty, dist) for price, (qty, dist) in net.items() if qty > 0]
    if not grown:
        return {"added_qty": 0.0, "added_notional": 0.0, "levels": 0, "depth_share": 0.0}
    tick = eng.tracker.tick or 1.0
    mid = eng.tracker.mid() or touch or 1.0
    dists = [g[2] for g in grown]
    added = sum(g[1] for g in grown)
    depth20 = eng.base.med_depth20[side]
    return {
        "added_qty": round(added, 12), "depth_share": round(added / depth20, 4) if depth20 else 0.0,
        "added_notional": round(sum(g[0] * g[1] for g in grown), 6),
        "levels": len(grown),
        "distance_ticks_min": round(min(dists), 2), "distance_ticks_max": round(max(dists), 2),
        "distance_bps_min": round(min(dists) * tick / mid * 1e4, 3),
        "distance_bps_max": round(max(dists) * tick / mid * 1e4, 3),
    }


class VacuumingDetector:
    def __init__(self) -> None:
        self.sides = {"bid": _Side(), "ask": _Side()}
        self.pending: list[_Pending] = []

    def reset(self) -> None:
        for s in self.sides.values():
            s.hist.clear()
            s.flow.clear()
            s.adds.clear()
            s.seen_top.clear()
            s.top = ()
        self.pending.clear()

    def cancelled_elsewhere(self, side: str, price: float, since_ms: int, usual_depth: float,
                            own_qty: float) -> float:
        """Quantity the side's top-10 levels other than `price` lost to cancels since since_ms
        (as far back as the pull window reaches) and did not get back there: a side that
        re-quotes stays. While the side stands at VAC_OTHER_ELEVATED x its usual top-10 depth
        without the order of own_qty at `price` (which is not the side's depth shown by
        others), every cancel counts (a side showing unusual depth that cancels is withdrawing)."""
        st = self.sides[side]
        cancelled = sum(c for t, c, e, px in st.flow if t >= since_ms and px != price)
        elevated = max((x[1] for x in st.hist), default=0.0) - own_qty >= VAC_OTHER_ELEVATED * usual_depth
        return st.not_put_back(cancelled, since_ms, elevated, price)

    def claims(self, side: str, ts: int) -> bool:
        """The side's depth is being (or was just) vacuumed: its pulls are ours."""
        return any(p.side == side for p in self.pending) or ts - self.sides[side].last_event_ts < VAC_COOLDOWN_MS

    def _confirm(self, eng, ts: int) -> list:
        """Emit the pending pulls whose gap price moved into; drop those out of time."""
        out, keep = [], []
        mid = eng.tracker.mid()
        tick = eng.tracker.tick or 0.0
        for p in self.pending:
            if ts > p.deadline:
                continue  # price did not move into the gap in time
            other = self.sides["ask" if p.side == "bid" else "bid"]
            if ts <= p.watch_other_until and other.withdrew(other.cancelled_total - p.other_cancelled_from,
                                                            p.other_from_ts, p.other_depth, p.other_elevated):
                continue  # the other side was pulled too: a two-sided withdrawal
            if mid is not None and p.mid0:
                need = max(tick, p.move_sigma * eng.base.sigma_ret * p.mid0)
                moved = (p.mid0 - mid) if p.side == "bid" else (mid - p.mid0)  # pulled bids: down
                if moved >= need - 1e-12:
                    if p.deferred and any(r.used for r in p.args["recs"]):
                        continue  # layering took the collapse first
                    for r in p.args["recs"]:
                        r.used = True
                    p.args["extra_collapse"]["move_into_gap_sigma"] = round(
                        moved / (eng.base.sigma_ret * p.mid0), 3) if eng.base.sigma_ret else None
                    out.append(eng.make_event(ts=ts, **p.args))
                    continue
            keep.append(p)
        self.pending = keep
        return out

    def active(self, side: str, ts: int, base: float) -> bool:
        """The side's top-10 depth is (or just was) abnormally large."""
        st = self.sides[side]
        return st.elev_start is not None and (st.elev_end is None or ts - st.elev_end < VAC_WINDOW_MS) \
            and (st.elev_end or ts) - st.elev_start >= VAC_MIN_REST_MS or ts - st.last_event_ts < VAC_COOLDOWN_MS

    def on_changes(self, eng, changes, ts: int) -> list:
        out = []
        touched = set()
        for ch in changes:
            side = ch.side
            touched.add(side)
            st = self.sides[side]
            if ch.level_index >= 10:
                if ch.price not in st.top and ts - st.seen_top.get(ch.price, -VAC_WINDOW_MS - 1) > VAC_WINDOW_MS:
                    continue
            else:
                st.adds.append((ts, ch.price, ch.new - ch.old, ch.dist_ticks))
            if ch.cancelled > 0 or ch.executed > 0:
                canc = 0.0 if (ch.runover or ch.scrolled) else ch.cancelled
                st.flow.append((ts, canc, ch.executed, ch.price))
                st.cancelled_total += canc
        for side in ("bid", "ask"):  # a fixed order: a set's would follow the hash seed
            if side not in touched:
                continue
            st = self.sides[side]
            d = eng.tracker.top_depth(side, 10)
            seen = st.seen_top
            for px in st.top:  # they stood there until this update
                seen[px] = ts
            st.top = tuple(eng.tracker.top_prices(side, 10))
            if len(seen) > 200:
                st.seen_top = {px: t for px, t in seen.items() if ts - t <= VAC_WINDOW_MS}
            base = eng.base.med_depth10[side]
            hist = st.hist
            hist.append((ts, d))
            slow = st.slow
            if not slow or ts - slow[-1][0] >= 250:
                slow.append((ts, d))
                while slow and slow[0][0] < ts - VAC_BEFORE_MS:
                    slow.popleft()
            lim = ts - VAC_WINDOW_MS
            # the depth as it stood when the window opened stays: a pull that starts after a
            # quiet spell is measured from the depth it cut, not from after its first cancel
            while len(hist) > 1 and hist[1][0] <= lim:
                hist.popleft()
            while st.flow and st.flow[0][0] < lim:
                st.flow.popleft()
            adds = st.adds
            lim_adds = (st.elev_start - 1000) if st.elev_start is not None else lim
            while adds and adds[0][0] < min(lim, lim_adds, ts - VAC_MAX_REST_MS - 1000):
                adds.popleft()
            if base <= 0:
                continue
            if d >= VAC_ELEVATED * base:
                if st.elev_start is None or st.elev_end is not None:
                    if st.elev_end is None or ts - st.elev_end > 1500:
                        st.elev_start = ts
                        st.before_elevation = min((x[1] for x in st.slow), default=d)
                    st.elev_end = None
            elif d < 1.05 * base and st.elev_start is not None and st.elev_end is None:
                st.elev_end = ts
            if st.elev_start is None or ts < st.cooldown:
                continue
            peak_ts, peak = max(hist, key=lambda x: x[1])
            peak_ts = max(peak_ts, lim)
            if peak < VAC_PEAK * base or peak < eng.base.unusual_depth10[side]:
                continue  # not unusual: the side often shows this much
            canc = ex = 0.0
            levels: set = set()  # prices the pull touched
            biggest = 0.0
            n_cancels, first_cancel, last_cancel = _pull_span(st.flow, peak_ts)
            if last_cancel is None:
                continue
            by_level: dict = {}
            for t, c, e, px in st.flow:
                # trades after the last cancel are price moving into the gap, not the pull
                if peak_ts <= t <= last_cancel:
                    canc += c
                    ex += e
                    if c > 0:
                        biggest = max(biggest, c)
                        by_level[px] = by_level.get(px, 0.0) + c
                    levels.add(px)
            # the depth the pull left (before takers moved into the gap)
            d_pull = next((x for t, x in reversed(hist) if t <= last_cancel), d)
            drop = peak - d_pull
            if drop < VAC_DROP_OF_EXCESS * (peak - base) or drop < VAC_MIN_DROP * base:
                continue
            # resting until the pull began (the pull's own time is not rest)
            rest = min(st.elev_end or peak_ts, peak_ts) - st.elev_start
            if rest < VAC_MIN_REST_MS or rest > VAC_MAX_REST_MS:
                continue
            if canc < VAC_CANCEL_SHARE * drop or ex > VAC_MAX_EXECUTED * (canc + ex):
                continue
            if len(levels) < VAC_MIN_LEVELS or biggest > _max_cancel_share(by_level, canc, eng.tracker.batch_ms) * canc:
                continue  # one order pulled (a flip, a refresh), not a side's depth
            if canc < VAC_MIN_CANCELLED * base or n_cancels < VAC_MIN_CANCELS:
                continue  # not enough of the side's usual depth pulled, or pulled by one or two orders
            readded = sum(a[2] for a in st.adds if first_cancel <= a[0] <= last_cancel and a[2] > 0)
            if readded > VAC_MAX_READDED * canc:
                continue  # put back as it was cancelled: market makers moving a ladder, not depth withdrawn
            other = "ask" if side == "bid" else "bid"
            oh = self.sides[other].hist
            od = eng.tracker.top_depth(other, 10)
            opeak = max((x[1] for x in oh if x[0] >= peak_ts - VAC_OTHER_FROM_MS), default=od)
            other_from = peak_ts - VAC_OTHER_FROM_MS
            other_cancelled = sum(c for t, c, e, px in self.sides[other].flow if t >= other_from)
            omed = eng.base.med_depth10[other]
            other_elevated = opeak >= VAC_OTHER_ELEVATED * omed
            if self.sides[other].withdrew(other_cancelled, other_from, opeak, other_elevated):
                st.cooldown = ts + VAC_COOLDOWN_MS  # a two-sided pull
                continue
            if omed > 0 and opeak / omed >= VAC_OTHER_DEEPER * peak / base:
                continue  # the other side stands deeper still against its usual depth: no one-sided depth was shown
            # what the pull took that had rested: at each price, a cancel takes the quantity
            # added there in the last VAC_MIN_REST_MS first (a quote replaced is no depth that rested)
            fresh: dict = {}
            for t, px, change, _ in st.adds:
                if change > 0 and first_cancel - VAC_MIN_REST_MS <= t <= last_cancel:
                    fresh[px] = fresh.get(px, 0.0) + change
            pulled_at: dict = {}
            for t, c, e, px in st.flow:
                if peak_ts <= t <= last_cancel and c > 0:
                    pulled_at[px] = pulled_at.get(px, 0.0) + c
            rested = sum(max(0.0, c - fresh.get(px, 0.0)) for px, c in pulled_at.items())
            # quotes placed a moment ago and withdrawn are a ladder re-quoted as often as depth
            # pegged to the touch: only a decisive move into the gap, at once, tells them apart
            fresh_pull = rested < VAC_MIN_RESTED * canc
            # what built the depth: growth of the side's ten best levels from (just before)
            # the elevation to the peak; the large orders among it are the ones this pull claims
            build_from = st.elev_start - 1000
            built = [a for a in st.adds if build_from <= a[0] <= peak_ts]
            touch = eng.tracker.best(side)
            build_fields = _build_fields(built, eng, side, touch)
            if build_fields["added_qty"] < VAC_MIN_BUILT * (peak - base):
                continue  # depth that came into view as price moved, not depth someone placed
            if canc > VAC_MAX_PULLED_OF_BUILT * build_fields["added_qty"]:
                continue  # the side's standing depth went with it: the book withdrawing, not a build pulled
            built_prices = {a[1] for a in built if a[2] > 0}
            recs = [r for r in eng.records[side]
                    if build_from <= r.t_add <= peak_ts and r.price in built_prices and not r.used]
            scale = eng.tracker.scale
            prices = [r.price for r in recs]
            # a few distinct large orders behind the touch have layering's shape: they are
            # ours only if price moves into the gap before layering judges the collapse
            layer_shaped = len(prices) >= 3 and len(set(prices)) == len(prices) and \
                min(r.dist_ticks for r in recs) >= 0.5 * scale
            st.cooldown = ts + VAC_COOLDOWN_MS
            st.last_event_ts = ts
            if not layer_shaped:
                for r in recs:
                    r.used = True
            other_state = self.sides[other]
            deadline = ts + (VAC_LAYER_SHAPED_MOVE_MS if layer_shaped else VAC_MOVE_MS)
            move_sigma = VAC_MOVE_SIGMA * VAC_MOVE_HORIZON
            if fresh_pull:
                deadline, move_sigma = min(deadline, ts + VAC_FRESH_MOVE_MS), VAC_FRESH_MOVE_SIGMA
            self.pending.append(_Pending(side, deadline, eng.mid_at(peak_ts) or eng.tracker.mid(), dict(
                scheme="vacuuming", side=side, price=touch, recs=recs, t_collapse=peak_ts, t_collapse_end=ts,
                build_start=st.elev_start, build_end=peak_ts, extra_build=build_fields,
                extra_collapse={"cancelled_qty": round(canc, 12), "executed_qty": round(ex, 12),
                                "cancel_ratio": round(canc / (canc + ex), 4) if canc + ex else 1.0,
                                "removed_fraction": round(drop / peak, 4) if peak else 0.0,
                                "depth_before_qty": round(peak, 12), "depth_after_qty": round(d_pull, 12),
                                "levels_pulled": len(levels), "cancels": n_cancels,
                                "pull_span_ms": (last_cancel - first_cancel) if first_cancel is not None else 0,
                                "biggest_cancel_qty": round(biggest, 12),
                                "readded_qty": round(readded, 12), "rested_qty": round(rested, 12),
                                "depth_before_build_qty": round(st.before_elevation or 0.0, 12),
                                "baseline_depth_qty": round(base, 12),
                                "depth_drop": round(drop / peak, 4) if peak else 0.0,
                                "cancelled_qty_top10": round(canc, 12), "executed_qty_top10": round(ex, 12),
                                "other_side_drop": round((opeak - od) / opeak, 4) if opeak else 0.0},
                features={"size_ratio": peak / base, "cancel_ratio": canc / (canc + ex) if canc + ex else 0.0,
                          "removed": drop / peak if peak else 0.0}),
                other_state.cancelled_total - other_cancelled, opeak, peak_ts + VAC_OTHER_SIDE_MS,
                layer_shaped, other_from, move_sigma, other_elevated))
        if self.pending:
            out.extend(self._confirm(eng, ts))
        return out
