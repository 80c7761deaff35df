"""Legitimate look-alikes (hard negatives): each shaped like a scheme and failing
DETECTION.md's definition of it in the way honest trading does. Plain Python.

- following_ladder: large levels a few ticks behind the touch, cancelled and re-posted as
  the touch moves (the liquidity moves with the price rather than vanishing).
- iceberg: a level at the touch refilled after each fill (executed, not cancelled).
- quote_refresh: a large best quote cancelled and re-posted within ms at the same or next
  price, on the same side (no opposite trade, no mirror).
- filled_wall: a large order near the touch that takers trade through.
- far_patient: large orders far from the touch, cancelled after minutes.
- two_sided_pull: unusual depth on both sides, both pulled together (a market maker
  stepping back, not a one-sided vacuum).
- sweep: unusual depth taken by an aggressive order (removed, but executed).
- scroll_out: large levels near the bottom of the visible window that leave the feed when
  the price moves away (the view moved; nothing was cancelled)."""

from __future__ import annotations

from .schemes import bg_best, _distinct, _finish, _pull_plan, _spread_times, _sweep_until, _taker_against


def draw_negative(r, kind: str) -> dict:
    if kind == "following_ladder":
        p = {"n_levels": r.randint(3, 6), "size_factor": r.uniform(1.1, 2.5), "build_ms": r.randint(0, 2500),
             "follow_ms": r.randint(30_000, 150_000), "check_ms": r.randint(150, 600), "first_offset": r.randint(1, 5),
             "fade_ms": r.randint(10_000, 40_000)}
        p["duration_ms"] = p["build_ms"] + p["follow_ms"] + p["fade_ms"] + 2000
    elif kind == "iceberg":
        p = {"display_factor": r.uniform(1.0, 3.0), "refills": r.randint(3, 10), "refill_delay_ms": r.randint(30, 400),
             "hit_every_ms": r.randint(300, 3000)}
        p["duration_ms"] = (p["refills"] + 2) * (p["hit_every_ms"] + p["refill_delay_ms"]) + 2000
    elif kind == "quote_refresh":
        p = {"size_factor": r.uniform(1.1, 3.0), "refreshes": r.randint(2, 6), "life_ms": r.randint(500, 8000),
             "gap_ms": r.randint(10, 300)}
        p["duration_ms"] = (p["refreshes"] + 1) * (p["life_ms"] + p["gap_ms"]) + 2000
    elif kind == "filled_wall":
        p = {"size_factor": r.uniform(1.1, 4.0), "distance": r.randint(0, 3), "rest_ms": r.randint(1000, 10_000),
             "hits": r.randint(2, 6), "fill_ms": r.randint(2000, 20_000), "fill_fraction": r.uniform(0.7, 1.0)}
        p["duration_ms"] = p["rest_ms"] + p["fill_ms"] + 3000
    elif kind == "far_patient":
        p = {"n_levels": r.randint(2, 4), "size_factor": r.uniform(1.1, 3.0), "build_ms": r.randint(0, 3000),
             "rest_ms": r.randint(120_000, 300_000), "pull_ms": r.randint(0, 1000)}
        p["duration_ms"] = p["build_ms"] + p["rest_ms"] + 3000
    elif kind == "two_sided_pull":
        p = {"depth_ratio": r.uniform(1.5, 3.0), "n_children": r.randint(2, 4), "build_ms": r.randint(500, 5000),
             "rest_ms": r.randint(2000, 20_000), "pull_ms": r.randint(0, 1000)}
        p["duration_ms"] = p["build_ms"] + p["rest_ms"] + 3000
    elif kind == "sweep":
        p = {"depth_ratio": r.uniform(1.5, 3.0), "n_children": r.randint(2, 5), "build_ms": r.randint(500, 5000),
             "rest_ms": r.randint(2000, 20_000), "sweep_orders": r.randint(1, 3), "sweep_ms": r.randint(0, 800),
             "executed_share": r.uniform(0.6, 1.0)}
        p["duration_ms"] = p["build_ms"] + p["rest_ms"] + 3000
    elif kind == "scroll_out":
        p = {"n_levels": r.randint(2, 3), "size_factor": r.uniform(1.1, 3.0), "build_ms": r.randint(0, 2000),
             "rest_ms": r.randint(2000, 15_000), "move_share": r.uniform(0.15, 0.5)}
        p["duration_ms"] = p["build_ms"] + p["rest_ms"] + 3000
    else:
        raise ValueError(kind)
    return p


def following_ladder(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    step = 1 if sim.p.cls == "dense" else r.randint(3, 15)
    offsets = [P["first_offset"] + i * step for i in range(P["n_levels"])]
    st = {"orders": [], "reposts": 0}

    def post(ms, offs):
        best = bg_best(side)
        used: set = set()
        for off in offs:
            tick = _distinct(side, best - side.sign * off, used, 1)
            lots = max(1, int(st["lots"]))
            o = bk.place_own(rec.side, tick, lots, ms, "ladder")
            st["orders"].append(o)
            rec.add(o, off, side.rank_of(tick) - 1)
        st["touch"] = best

    def build(i, offs):
        def act(ms):
            if "lots" not in st:
                st["lots"] = P["size_factor"] * sim.large_lots(rec.side, offsets[0])
            post(ms, offs)
        return act

    half = max(1, len(offsets) // 2)
    sim.schedule(t0, build(0, offsets[:half]))
    sim.schedule(t0 + P["build_ms"], build(1, offsets[half:]))
    stop = t0 + P["build_ms"] + P["follow_ms"]

    def check(ms):
        if ms >= stop:
            live = [o for o in st["orders"] if o.lots]
            for ts, o in zip(_spread_times(r, ms, P["fade_ms"], len(live)), live):
                def fade(ms2, o=o):
                    bk.pull_own(o, None, ms2)
                    rec.act(ms2, collapse=True)
                sim.schedule(ts, fade)
            P["reposts"] = st["reposts"]
            _finish(sim, rec, ms + P["fade_ms"] + 1)
            return
        if bg_best(side) != st["touch"]:
            live = [o for o in st["orders"] if o.lots]
            for o in live:
                bk.pull_own(o, None, ms)
            st["orders"] = []
            rec.act(ms, collapse=True)
            post(ms, offsets)
            st["reposts"] += 1
        sim.schedule(ms + P["check_ms"], check)
    sim.schedule(t0 + P["build_ms"] + P["check_ms"], check)


def iceberg(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    st = {"left": P["refills"]}

    def place(ms):
        if "lots" not in st:
            st["lots"] = max(1, int(P["display_factor"] * sim.median_level(rec.side, 0)))
            st["tick"] = side.best()
        tick = st["tick"]
        other = bk.other(rec.side).best()
        if other is not None and (tick - other) * side.sign >= 0:
            tick = side.best()
        st["order"] = bk.place_own(rec.side, tick, st["lots"], ms, "slice")
        rec.add(st["order"], abs(side.best() - tick), side.rank_of(tick) - 1)
        sim.schedule(ms + r.randint(P["hit_every_ms"] // 2, P["hit_every_ms"]), hit)

    def hit(ms):
        o = st["order"]
        _sweep_until(bk, _taker_against(rec.side), ms, lambda: o.lots == 0, max_levels=6)
        rec.act(ms, collapse=True)
        if o.lots == 0 and st["left"] > 0:
            st["left"] -= 1
            sim.schedule(ms + P["refill_delay_ms"], place)
        else:
            _finish(sim, rec, ms + 1)
    sim.schedule(t0, place)


def quote_refresh(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    st = {"left": P["refreshes"]}

    def place(ms):
        best = side.best()
        if "lots" not in st:
            st["lots"] = max(1, int(P["size_factor"] * sim.large_lots(rec.side, 0)))
            tick = best
        else:
            tick = st["tick"] + side.sign * r.choice((-1, 0, 0, 1))  # the same or the next price
        st["tick"] = tick
        o = bk.place_own(rec.side, tick, st["lots"], ms, "quote")
        st["tick"] = o.tick
        rec.add(o, abs(best - o.tick), side.rank_of(o.tick) - 1)
        if st["left"] == 0:
            _finish(sim, rec, ms + 1)
            return
        st["left"] -= 1

        def refresh(ms2):
            bk.pull_own(o, None, ms2)
            rec.act(ms2, collapse=True)
            sim.schedule(ms2 + P["gap_ms"], place)
        sim.schedule(ms + r.randint(P["life_ms"] // 2, P["life_ms"]), refresh)
    sim.schedule(t0, place)


def filled_wall(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    st: dict = {}

    def place(ms):
        best = side.best()
        lots = max(1, int(P["size_factor"] * sim.large_lots(rec.side, P["distance"])))
        st["o"] = bk.place_own(rec.side, best - side.sign * P["distance"], lots, ms, "wall")
        rec.add(st["o"], P["distance"], side.rank_of(st["o"].tick) - 1)
    sim.schedule(t0, place)
    times = _spread_times(r, t0 + P["rest_ms"], P["fill_ms"], P["hits"])
    for k, ts in enumerate(times, 1):
        def hit(ms, k=k):
            o = st["o"]
            goal = P["fill_fraction"] * o.placed * k / P["hits"]
            _sweep_until(bk, _taker_against(rec.side), ms, lambda: o.filled >= goal or o.lots == 0)
            rec.act(ms, collapse=True)
        sim.schedule(ts, hit)

    def rest(ms):
        o = st["o"]
        if o.lots:
            bk.pull_own(o, None, ms)
        rec.act(ms)
        _finish(sim, rec, ms + 1)
    sim.schedule(times[-1] + r.randint(200, 2000), rest)


def far_patient(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    lo, hi = sim.p.far_offset_ticks
    used: set = set()
    for ts in _spread_times(r, t0, P["build_ms"], P["n_levels"]):
        def place(ms):
            best = side.best()
            d = r.randint(lo, hi)
            tick = _distinct(side, best - side.sign * d, used, 1)
            lots = max(1, int(P["size_factor"] * sim.large_lots(rec.side, d)))
            rec.add(bk.place_own(rec.side, tick, lots, ms, "far"), d, side.rank_of(tick) - 1)
        sim.schedule(ts, place)

    def pull(ms):
        last = _pull_plan(sim, rec, ms, {o: o.lots for o, _, _ in rec.orders}, P["pull_ms"], 2)
        _finish(sim, rec, last + 1)
    sim.schedule(t0 + P["build_ms"] + P["rest_ms"], pull)


def _build_depth(sim, rec, t0, names):
    """Children raising the top-10 depth of each named side by depth_ratio."""
    P, bk, r = rec.params, sim.book, sim.rng
    base: dict = {}
    n = P["n_children"]
    for name in names:
        side = bk.side(name)
        for i, ts in enumerate(_spread_times(r, t0, P["build_ms"], n)):
            def place(ms, side=side, name=name):
                if name not in base:
                    base[name] = bk.depth(side, 10)
                best = side.best()
                rank = r.randint(2, 8)
                tick = side.tick_at_rank(rank) or best
                lots = max(1, int((P["depth_ratio"] - 1) * base[name] / n))
                rec.add(bk.place_own(name, tick, lots, ms, "child"), abs(best - tick), rank - 1)
            sim.schedule(ts, place)
    return t0 + P["build_ms"]


def two_sided_pull(sim, rec, t0):
    P = rec.params
    end = _build_depth(sim, rec, t0, ("bid", "ask"))

    def pull(ms):
        last = _pull_plan(sim, rec, ms, {o: o.lots for o, _, _ in rec.orders}, P["pull_ms"], 3)
        _finish(sim, rec, last + 1)
    sim.schedule(end + P["rest_ms"], pull)


def sweep(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    end = _build_depth(sim, rec, t0, (rec.side,))
    times = _spread_times(r, end + P["rest_ms"], P["sweep_ms"], P["sweep_orders"])
    for k, ts in enumerate(times, 1):
        def hit(ms, k=k):
            placed = sum(o.placed for o, _, _ in rec.orders)
            goal = P["executed_share"] * placed * k / len(times)
            _sweep_until(bk, _taker_against(rec.side), ms,
                         lambda: sum(o.filled for o, _, _ in rec.orders) >= goal, max_levels=20)
            rec.act(ms, collapse=True)
        sim.schedule(ts, hit)
    _finish(sim, rec, times[-1] + 1)


def scroll_out(sim, rec, t0):
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    n_vis = sim.p.visible_levels
    used: set = set()
    for ts in _spread_times(r, t0, P["build_ms"], P["n_levels"]):
        def place(ms):
            rank = r.randint(n_vis - 6, n_vis - 2)
            tick = _distinct(side, side.tick_at_rank(rank) or side.best(), used, 1)
            d = abs(side.best() - tick)
            lots = max(1, int(P["size_factor"] * sim.large_lots(rec.side, d)))
            rec.add(bk.place_own(rec.side, tick, lots, ms, "deep"), d, side.rank_of(tick) - 1)
        sim.schedule(ts, place)

    def move(ms):
        # the price runs away from the deep levels by a share of the window's span
        live = [o for o, _, _ in rec.orders if o.lots] or [o for o, _, _ in rec.orders]
        best = side.best()
        need = max(0, n_vis - min(side.rank_of(o.tick) for o in live) + 1)  # new levels that push them out
        shift = max(need + 1, int(P["move_share"] * max(abs(best - o.tick) for o in live)))
        other = bk.other(rec.side)
        bk.market(_taker_against("ask" if rec.side == "bid" else "bid"), 10**12, ms, other.best() + side.sign * shift)
        step = max(1, shift // (need + 1))
        for k in range(1, need + 1):
            bk.add_limit(rec.side, best + side.sign * k * step, sim._lots(0))
        sim.fair += side.sign * shift
        P["shift_ticks"] = shift
        rec.act(ms, collapse=True)
        _finish(sim, rec, ms + 1)
    sim.schedule(t0 + P["build_ms"] + P["rest_ms"], move)


SCRIPTS = {"following_ladder": following_ladder, "iceberg": iceberg, "quote_refresh": quote_refresh,
           "filled_wall": filled_wall, "far_patient": far_patient, "two_sided_pull": two_sided_pull,
           "sweep": sweep, "scroll_out": scroll_out}
