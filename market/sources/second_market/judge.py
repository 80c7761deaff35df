"""Did a clear episode happen as a clear case? DETECTION.md's thresholds applied to what the
scripts recorded (parameters["orders"], parameters["pulls"] and the measures each script
takes as it acts), never to what was drawn. Plain Python.

One rule for every episode, written from DETECTION.md's table alone (fixed before any
detector was run on it). A clear episode breaks a threshold when, as it happened:

layering (the layers: every child order)
- "executed": takers executed more than 10 % of the layers' quantity by the end of the
  pull (the last pull action), fills before the pull included (<= 10 % executed);
- "large levels": fewer than 3 layers at distinct prices were large (quantity >= the
  max(5 x median level, 15 % of top-20 depth) bound it was sized against, the episode's
  baseline) within one 3 s window of their placements (large adds on >= 3 levels within 3 s);
- "behind": fewer than 2 of the large layers were 1-25 ticks behind the touch when placed;
- "removed": cancelled plus executed by the last pull action up to 60 s after the last layer
  was placed is under 70 % of the layers' quantity (>= 70 % removed within 60 s);
- "cluster": the pull cancelled something and no 1 s window holds more than half of it
  (mostly in one 1 s cluster).

flipping (the large add: its child orders; the mirror is not one of them)
- "touch": a child was more than 2 ticks from the touch when placed (0-2 ticks);
- "large": the add's quantity is under the large bound it was sized against;
- "life": a child rested more than 10 s before it was cancelled (life <= 10 s);
- "cancelled": less than 80 % of the add's quantity was cancelled (>= 80 % cancelled);
- "flip": within 1 s of the first cancel, the aggressive trades executed less than
  max(20 % of the add, 3 x the typical taker second) (parameters["flip_required_lots"]), or
  the mirror was placed later than 1 s after it or is under 50 % of the add.

vacuuming (the depth: the episode's child orders; "removed" is a share of what it added,
the generator's reading)
- "depth": the side's top-10 depth was under 1.5 x its baseline when the pull began
  (parameters["ratio_at_pull"]);
- "rest": it had stood at >= 1.5 x for less than 2 s, without a break, when the pull began
  (parameters["stood_ms_at_pull"]; measured on the book as the feed shows it);
- "removed": cancelled plus executed in the 1 s from the first pull action is under 50 %
  of the quantity added (>= 50 % removed within 1 s);
- "executed": takers executed more than 20 % of the quantity added by the end of the pull
  (<= 20 % executed, else a sweep);
- "other side": the other side's top-10 depth fell by 20 % or more from the pull's start to
  its last action (< 20 %, else a two-sided pull);
- "mid move": the mid had not moved >= max(1 tick, 0.5 sigma) toward the gap within 5 s of
  the pull's start.

Each broken threshold gives a reason "<the threshold, broken> (<as it happened>)", e.g.
"executed > 10 % (25 %)"; the text before " (" names the threshold, the same for every
episode, so reasons can be counted.

`completed_ms` reads the same records for the instant a clear episode became a whole case
of the table (the last of its collapse's thresholds met), the instant a detection's latency
counts from: layering when its removed share reached 70 %, flipping when its cancels reached
80 % of the add and its flip its size (the aggressive trades' required quantity, or the
mirror placed), vacuuming when its removed share reached 50 % and the mid had moved. A
layering pull's tail may follow its cluster by up to a minute; the episode's last action
would count a detection made once 70 % had gone as that much early."""

from __future__ import annotations

EPS = 1e-9


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _best_window(points, span_ms: int) -> float:
    """The largest sum of values whose instants fit in one window of span_ms (inclusive)."""
    points = sorted(points)
    best = total = 0.0
    j = 0
    for i, (ms, v) in enumerate(points):
        total += v
        while points[j][0] < ms - span_ms:
            total -= points[j][1]
            j += 1
        best = max(best, total)
    return best


def _filled_by_end(o: dict) -> float:
    got = o.get("filled_by_pull_end")
    return o["filled"] if got is None else got


def _layering(p: dict) -> list[str]:
    out = []
    orders = list(p["orders"])
    placed = sum(o["qty"] for o in orders)
    pulls = p.get("pulls", ())
    executed = sum(_filled_by_end(o) for o in orders) / placed if placed else 0.0
    if executed > 0.10 + EPS:
        out.append(f"executed > 10 % ({_pct(executed)})")
    large = [o for o in orders if o.get("large_qty") is not None and o["qty"] >= o["large_qty"] - EPS]
    # the most large layers at distinct prices placed inside one 3 s window
    best_group: list = []
    for o in large:
        group = {x["price"]: x for x in large if o["placed_ms"] <= x["placed_ms"] <= o["placed_ms"] + 3000}
        if len(group) > len(best_group):
            best_group = list(group.values())
    if len(best_group) < 3:
        out.append(f"large levels within 3 s < 3 ({len(best_group)})")
    else:
        behind = sum(1 for o in best_group if 1 <= o["distance_ticks"] <= 25)
        if behind < 2:
            out.append(f"large levels 1-25 ticks behind the touch < 2 ({behind})")
    last_add = max(o["placed_ms"] for o in orders)
    inside = [x for x in pulls if x[0] <= last_add + 60_000]
    removed = (sum(x[1] for x in inside) + (inside[-1][2] if inside else 0.0)) / placed if placed else 0.0
    if removed < 0.70 - EPS:
        out.append(f"removed within 60 s < 70 % ({_pct(removed)})")
    cancelled = sum(x[1] for x in pulls)
    if cancelled:  # nothing cancelled: takers took it all, "executed" says so
        cluster = _best_window([(x[0], x[1]) for x in pulls], 1000) / cancelled
        if cluster <= 0.5 + EPS:
            out.append(f"largest 1 s cluster of the pull <= 50 % ({_pct(cluster)})")
    return out


def _flipping(p: dict) -> list[str]:
    out = []
    orders = [o for o in p["orders"] if o["tag"] != "mirror"]
    placed = sum(o["qty"] for o in orders)
    far = max(o["distance_ticks"] for o in orders)
    if far > 2:
        out.append(f"placed > 2 ticks from the touch ({far} ticks)")
    if p.get("large_qty") is not None and placed < p["large_qty"] - EPS:
        out.append(f"add < the large bound ({placed / p['large_qty']:.2f} x)")
    lives = [o["pulled_ms"] - o["placed_ms"] for o in orders if o["pulled_ms"] is not None]
    if lives and max(lives) > 10_000:
        out.append(f"life > 10 s ({max(lives) / 1000:.1f} s)")
    cancelled = sum(o["cancelled"] for o in orders) / placed if placed else 0.0
    if cancelled < 0.80 - EPS:
        out.append(f"cancelled < 80 % ({_pct(cancelled)})")
    pulls = p.get("pulls", ())
    if not pulls:  # never cancelled: "cancelled" says so
        return out
    t_cancel = pulls[0][0]
    if p["mode"] == "aggressive":
        need = p.get("flip_required_lots") or 0
        done = sum(lots for ms, lots in p.get("flip_trades", ()) if ms <= t_cancel + 1000)
        if done < need:
            out.append(f"aggressive flip within 1 s < max(20 % of size, 3 x taker second) "
                       f"({done / need if need else 0:.2f} x)")
    else:
        at = p.get("mirror_ms")
        if at is None or at - t_cancel > 1000:
            out.append(f"mirror > 1 s after the cancel ({'none' if at is None else f'{at - t_cancel} ms'})")
        mirror = p.get("mirror_qty") or 0.0
        if placed and mirror < 0.5 * placed - EPS:
            out.append(f"mirror < 50 % of size ({_pct(mirror / placed)})")
    return out


def _vacuuming(p: dict, side: str) -> list[str]:
    out = []
    orders = p["orders"]
    placed = sum(o["qty"] for o in orders)
    ratio = p.get("ratio_at_pull")
    if ratio is None or ratio < 1.5:
        out.append(f"top-10 depth at the pull < 1.5 x baseline ({'none' if ratio is None else f'{ratio:.2f} x'})")
    else:
        stood = p.get("stood_ms_at_pull", 0)
        if stood < 2000:
            out.append(f"resting at >= 1.5 x before the pull < 2 s ({stood / 1000:.1f} s)")
    pulls = p.get("pulls", ())
    if not pulls:
        out.append("removed within 1 s < 50 % (never pulled)")
        return out
    t0 = pulls[0][0]
    inside = [x for x in pulls if x[0] <= t0 + 1000]
    removed = (sum(x[1] for x in inside) + inside[-1][2] - pulls[0][2]) / placed if placed else 0.0
    if removed < 0.50 - EPS:
        out.append(f"removed within 1 s < 50 % ({_pct(removed)})")
    executed = sum(_filled_by_end(o) for o in orders) / placed if placed else 0.0
    if executed > 0.20 + EPS:
        out.append(f"executed > 20 % ({_pct(executed)})")
    before, after = p.get("other_top10_at_pull"), p.get("other_top10_after_pull")
    if before and after is not None:
        fell = 1 - after / before
        if fell >= 0.20 - EPS:
            out.append(f"other side fell >= 20 % ({_pct(fell)})")
    move, bound, at = p.get("mid_move_ticks"), p.get("move_bound_ticks"), p.get("move_ms")
    toward = None if move is None else (-move if side == "bid" else move)
    if toward is None or bound is None or at is None:
        out.append("mid move toward the gap within 5 s < max(1 tick, 0.5 sigma) (none)")
    elif at - t0 > 5000:
        out.append(f"mid move toward the gap later than 5 s after the pull ({(at - t0) / 1000:.1f} s)")
    elif toward < bound - EPS:
        out.append(f"mid move toward the gap within 5 s < max(1 tick, 0.5 sigma) ({toward:g} of {bound:g} ticks)")
    return out


def _reached(pulls, placed: float, share: float, filled_before: float = 0.0) -> int | None:
    """The first pull action at which cancelled plus executed (since filled_before) reached
    `share` of what was placed."""
    cancelled = 0.0
    for ms, lots, filled in pulls:
        cancelled += lots
        if cancelled + filled - filled_before >= share * placed - EPS:
            return ms
    return None


def completed_ms(ep) -> int | None:
    """When a clear episode, as it happened, met the last of its collapse's thresholds (see
    the module docstring); None when it never did (a disrupted episode) or is no spoof."""
    p = ep.parameters
    if ep.scheme is None or not p.get("orders"):
        return None
    pulls = p.get("pulls", ())
    if ep.scheme == "layering":
        return _reached(pulls, sum(o["qty"] for o in p["orders"]), 0.70)
    if ep.scheme == "flipping":
        orders = [o for o in p["orders"] if o["tag"] != "mirror"]
        cancelled = _reached([(ms, lots, 0.0) for ms, lots, _ in pulls], sum(o["qty"] for o in orders), 0.80)
        if p["mode"] == "aggressive":
            need, done, flipped = p.get("flip_required_lots") or 0, 0, None
            for ms, lots in p.get("flip_trades", ()):
                done += lots
                if done >= need:
                    flipped = ms
                    break
        else:
            flipped = p.get("mirror_ms")
        return None if cancelled is None or flipped is None else max(cancelled, flipped)
    if not pulls:
        return None
    removed = _reached(pulls, sum(o["qty"] for o in p["orders"]), 0.50, pulls[0][2])
    moved = p.get("move_ms")
    return None if removed is None or moved is None else max(removed, moved)


def broken_thresholds(ep) -> list[str]:
    """The reasons a clear episode did not happen as a clear case (empty: it did); near
    misses and hard negatives are not judged (empty)."""
    p = ep.parameters
    if ep.scheme is None or p.get("near_miss") or not p.get("orders"):
        return []
    if ep.scheme == "layering":
        return _layering(p)
    if ep.scheme == "flipping":
        return _flipping(p)
    return _vacuuming(p, ep.side)
