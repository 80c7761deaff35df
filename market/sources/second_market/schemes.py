"""The three spoofing schemes as scripts on the simulation clock. Plain Python.

A script places child orders (several, at several instants), lets the market act on them,
then pulls them in several actions; what it did is recorded on the episode's Record so the
label is built from what actually happened, not only from what was drawn."""

from __future__ import annotations

import math

from ..events import BUY, SELL


def _taker_against(side_name: str) -> str:
    """The taker side that trades against resting orders on side_name."""
    return SELL if side_name == "bid" else BUY


def _spread_times(rng, start: int, span: int, n: int) -> list[int]:
    """n instants from start over span ms: the first at start, the last at start + span."""
    if n == 1:
        return [start]
    mid = sorted(rng.randint(0, span) for _ in range(n - 2))
    return [start] + [start + m for m in mid] + [start + span]


def _tick_behind(side, best: int, d: int) -> int:
    return best - side.sign * d


def _distinct(side, tick: int, used: set, step: int) -> int:
    while tick in used:
        tick -= side.sign * step
    used.add(tick)
    return tick


def _pull_plan(sim, rec, at: int, amounts: dict, spread_ms: int, groups: int, after=None) -> int:
    """Pull amounts[order] lots from each order in `groups` actions over spread_ms; the
    instant of the last action. Each action is recorded as it ran (rec.pulls, and what takers
    had executed of every order by then); after(ms), if given, runs at the end of the last."""
    orders = [o for o in amounts if amounts[o] > 0] or list(amounts)
    groups = max(1, min(groups, len(orders)))
    times = _spread_times(sim.rng, at, spread_ms, groups)
    for g, ts in enumerate(times):
        chunk = orders[g::groups]

        def act(ms, chunk=chunk, last=(g == len(times) - 1)):
            lots = 0
            for o in chunk:
                lots += sim.book.pull_own(o, amounts[o], ms)
            rec.act(ms, collapse=True)
            for o, _, _ in rec.orders:
                o.filled_by_pull_end = o.filled
            rec.pulls.append((ms, lots, sum(o.filled for o, _, _ in rec.orders)))
            if last and after is not None:
                after(ms)
        sim.schedule(ts, act)
    return times[-1]


def _finish(sim, rec, at: int) -> None:
    def act(ms):
        for o, _, _ in rec.orders:
            if o.lots:
                sim.book.release_own(o)
        rec.done = True
    sim.schedule(at, act)


def bg_best(side):
    """The touch without our own orders."""
    for k in side.keys:
        t = -side.sign * k
        if side.background(t) > 0:
            return t
    return side.best()


def _watch(sim, rec, start: int, end: int, pull, touch: bool = True, fill_share: float = 0.0) -> None:
    """A spoofer watches its layers: once the price reaches one (or takers fill any) it
    pulls at once rather than be executed; DETECTION.md's "cancelled once price moved"."""
    side = sim.book.side(rec.side)

    def check(ms):
        if ms >= end or rec.params.get("pulled_early") is not None:
            return
        best = bg_best(side)
        filled = sum(o.filled for o, _, _ in rec.orders)
        if filled > fill_share * sum(o.placed for o, _, _ in rec.orders) or (
                touch and any(o.lots and (o.tick - best) * side.sign >= 0 for o, _, _ in rec.orders)):
            rec.params["pulled_early"] = True
            pull(ms)
            return
        sim.schedule(ms + 100, check)
    sim.schedule(start, check)


def layering(sim, rec, t0: int) -> None:
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    dists = P["distances"]
    times = _spread_times(r, t0, P["build_ms"], len(dists))
    used: set = set()
    base: dict = {}

    def place(i):
        def act(ms):
            best = side.best()
            if not base:
                base["top20"] = bk.depth(side, 20)
                base["med"] = {d: sim.median_level(rec.side, d) for d in (1, 5, 15, 30)}
            mode, v = dists[i]
            tick = side.tick_at_rank(v + 1) if mode == "levels" else None
            if tick is None:
                tick = _tick_behind(side, best, v)
            tick = _distinct(side, tick, used, 1)
            d = abs(best - tick)
            med = base["med"][1 if d <= 2 else 5 if d <= 10 else 15 if d <= 25 else 30]
            large = max(5 * med, 0.15 * base["top20"])
            lots = max(1, int(P["size_factor"] * large))
            o = bk.place_own(rec.side, tick, lots, ms, mode)
            rec.large[o] = large
            rec.add(o, d, side.rank_of(tick) - 1)
        return act

    for i, ts in enumerate(times):
        sim.schedule(ts, place(i))
    build_end = times[-1]
    pull_at = build_end + P["rest_ms"]
    if P["opposite_trade"]:
        # the real trade the layers were placed for, done on the other side before the pull
        def opposite(ms):
            lots = int(sim.p.market_lots * r.uniform(1.0, 3.0))
            P["opposite_lots"] = bk.qty(bk.market(_taker_against(rec.side), lots, ms))
            rec.act(ms)
        sim.schedule(pull_at - r.randint(50, min(P["rest_ms"], 3000)), opposite)

    def begin_pull(ms):
        if "resting_at_pull" in P:
            return
        P["resting_at_pull"] = rec.resting_share()
        P["last_add_ms"] = max(o.placed_ms for o, _, _ in rec.orders)
        P["pull_after_last_add_ms"] = ms - P["last_add_ms"]
        frac, share = P["removed_fraction"], P["cluster_share"]
        cluster, tail = {}, {}
        for o, _, _ in rec.orders:
            amount = min(o.lots, round(frac * o.placed))
            cluster[o] = round(share * amount)
            tail[o] = amount - cluster[o]
        last = _pull_plan(sim, rec, ms, cluster, P["cluster_ms"], r.randint(2, 3))
        if any(tail.values()):
            limit = build_end + P["collapse_within_ms"] - 100
            if P.get("near_miss") == "collapse_window":
                limit = ms + 30_000
            at = r.randint(min(last + 200, limit), max(limit, last + 200))
            last = _pull_plan(sim, rec, at, tail, r.randint(0, 1000), r.randint(1, 2))
        _finish(sim, rec, last + 1)
    if P.get("near_miss") != "collapse_window":
        _watch(sim, rec, build_end + 1, pull_at, begin_pull)
    sim.schedule(pull_at, begin_pull)


def flipping(sim, rec, t0: int) -> None:
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    n = P["n_children"]
    times = _spread_times(r, t0, P["child_spread_ms"], n)
    state: dict = {}

    def place(i):
        def act(ms):
            if not state:
                best = side.best()
                state["tick"] = _tick_behind(side, best, P["touch_distance"])
                state["large"] = sim.large_lots(rec.side, P["touch_distance"])
                state["lots"] = P["size_factor"] * state["large"]
                P["large_qty"] = bk.qty(state["large"])
            tick = state["tick"]
            lots = max(1, int(state["lots"] / n))
            rec.add(bk.place_own(rec.side, tick, lots, ms, "child"), abs(side.best() - tick), side.rank_of(tick) - 1)
        return act

    for i, ts in enumerate(times):
        sim.schedule(ts, place(i))

    def begin_pull(ms):
        if "resting_at_pull" in P:
            return
        P["resting_at_pull"] = rec.resting_share()
        amounts = {o: min(o.lots, round(P["cancel_fraction"] * o.placed)) for o, _, _ in rec.orders}
        last = _pull_plan(sim, rec, ms, amounts, P["pull_spread_ms"], n)
        flip_at = last + P["flip_latency_ms"]
        placed = sum(o.placed for o, _, _ in rec.orders)
        if P["mode"] == "aggressive":
            need = max(0.2 * placed, 3 * sim.taker_second())
            total = int(P["flip_factor"] * need)
            parts = r.randint(1, 3)
            P["flip_required_lots"] = int(need)
            P["flip_lots"] = 0
            P["flip_trades"] = []  # (ms, lots executed)
            for ts in _spread_times(r, flip_at, P["flip_spread_ms"], parts):
                def hit(ms2):
                    done = bk.market(_taker_against(rec.side), total // parts, ms2)
                    P["flip_lots"] += done
                    P["flip_trades"].append((ms2, done))
                    rec.act(ms2)
                sim.schedule(ts, hit)
            _finish(sim, rec, flip_at + P["flip_spread_ms"] + 1)
        else:
            def mirror(ms2):
                other_name = "ask" if rec.side == "bid" else "bid"
                other = bk.side(other_name)
                tick = other.best() - other.sign * r.randint(0, 1)
                o = bk.place_own(other_name, tick, max(1, int(P["mirror_ratio"] * placed)), ms2, "mirror")
                P["mirror_price"], P["mirror_qty"] = bk.price(o.tick), bk.qty(o.placed)
                P["mirror_ms"] = ms2
                bk.release_own(o)  # the mirror is the trader's real interest: it simply rests
                rec.act(ms2)
            sim.schedule(flip_at, mirror)
            _finish(sim, rec, flip_at + 1)
    if P.get("near_miss") != "life_ms":
        _watch(sim, rec, t0 + P["child_spread_ms"] + 1, t0 + P["life_ms"], begin_pull, touch=False, fill_share=0.05)
    sim.schedule(t0 + P["life_ms"], begin_pull)


def _sweep_until(bk, taker: str, ms: int, done, max_levels: int = 15) -> int:
    side = bk.bid if taker == SELL else bk.ask
    total = 0
    for _ in range(max_levels):
        if done() or len(side.keys) <= 4:
            break
        total += bk.market(taker, side.qty[side.best()], ms)
    return total


def vacuuming(sim, rec, t0: int) -> None:
    P, bk, r = rec.params, sim.book, sim.rng
    side = bk.side(rec.side)
    other = bk.other(rec.side)
    n = P["n_children"]
    times = _spread_times(r, t0, P["build_ms"], n)
    weights = [r.uniform(0.5, 1.5) for _ in range(n)]
    ranks = sorted(r.sample(range(3, 11), n))  # behind the touch, inside the top 10
    state: dict = {}

    def stood(ms):
        # how long the side's top-10 depth has stood at >= 1.5 x its baseline, as the feed
        # shows the book at the end of each instant (DETECTION.md's "resting >= 2 s")
        if bk.depth(side, 10) >= 1.5 * state["base"]:
            if state.get("high_since") is None:
                state["high_since"] = ms
        else:
            state["high_since"] = None

    def place(i):
        def act(ms):
            if not state:
                state["base"] = sim.baseline_depth10(rec.side)
                P["baseline_top10"] = bk.qty(int(state["base"]))
                bk.watchers.append(stood)
            best = side.best()
            tick = side.tick_at_rank(ranks[i]) if sim.p.cls == "sparse" else _tick_behind(side, best, ranks[i] - 1)
            if tick is None:
                tick = _tick_behind(side, best, ranks[i] - 1)
            # aim at ratio x baseline given the background as it is now: it drifts meanwhile
            edge = side.tick_at_rank(10)
            own = sum(o.lots for o, _, _ in rec.orders if edge is None or (o.tick - edge) * side.sign >= 0)
            background = bk.depth(side, 10) - own
            goal = (P["depth_ratio"] * state["base"] - background) * sum(weights[:i + 1]) / sum(weights)
            lots = max(1, int(goal - own))
            rec.add(bk.place_own(rec.side, tick, lots, ms, "child"), abs(best - tick), side.rank_of(tick) - 1)
        return act

    for i, ts in enumerate(times):
        sim.schedule(ts, place(i))
    build_end = times[-1]
    pull_at = build_end + P["rest_ms"]

    def peak(ms):
        P["peak_ratio"] = round(bk.depth(side, 10) / max(1, state.get("base", 1)), 3)
    sim.schedule(build_end + 1, peak)
    if P["executed_share"]:
        def sweep(ms):
            placed = sum(o.placed for o, _, _ in rec.orders)
            _sweep_until(bk, _taker_against(rec.side), ms,
                         lambda: sum(o.filled for o, _, _ in rec.orders) >= P["executed_share"] * placed)
            rec.act(ms, collapse=True)
        sim.schedule(pull_at - r.randint(100, 900), sweep)

    def begin_pull(ms):
        if "resting_at_pull" in P:
            return
        P["resting_at_pull"] = rec.resting_share()
        P["ratio_at_pull"] = round(bk.depth(side, 10) / max(1, state.get("base", 1)), 3)
        if stood in bk.watchers:
            bk.watchers.remove(stood)
        since = state.get("high_since")
        high_now = "base" in state and bk.depth(side, 10) >= 1.5 * state["base"]
        P["stood_ms_at_pull"] = ms - since if high_now and since is not None else 0
        P["other_top10_at_pull"] = bk.qty(bk.depth(other, 10))
        state["mid2"] = bk.mid2()
        target = P["removed_fraction"] * sum(o.placed for o, _, _ in rec.orders)
        amounts = {}
        # the nearest children go first: what stays rests deepest, out of the price's way
        best = side.best()
        for o, _, _ in sorted(rec.orders, key=lambda x: (best - x[0].tick) * side.sign):
            take = int(min(o.lots, max(0, target)))
            amounts[o] = take
            target -= take
        if P["other_side_drop"]:
            goal = P["other_side_drop"] * bk.depth(other, 10)
            for k in list(other.keys[:10]):
                if goal <= 0:
                    break
                goal -= other.cancel_background(-other.sign * k, int(goal))
        def pulled(ms2):
            P["other_top10_after_pull"] = bk.qty(bk.depth(other, 10))
        last = _pull_plan(sim, rec, ms, amounts, P["pull_ms"], r.randint(2, 4), pulled)
        move_at = last + P["move_delay_ms"]

        def move(ms2):
            needed = P["move_factor"] * max(1.0, 0.5 * sim.sigma)
            own = [o.tick for o, _, _ in rec.orders if o.lots]
            if rec.side == "bid":
                limit = math.floor(state["mid2"] - 2 * needed - bk.ask.best()) + 1
                if own:
                    limit = max(limit, max(own) + 1)
                bk.market(SELL, 10**12, ms2, limit)
                # sellers also quote down into the hole (what still rests may stop the sweep)
                goal = math.floor(state["mid2"] - 2 * needed - bk.bid.best())
                if bk.ask.best() > goal:
                    bk.add_limit("ask", max(goal, bk.bid.best() + 1), sim._lots(0))
            else:
                limit = math.ceil(state["mid2"] + 2 * needed - bk.bid.best()) - 1
                if own:
                    limit = min(limit, min(own) - 1)
                bk.market(BUY, 10**12, ms2, limit)
                goal = math.ceil(state["mid2"] + 2 * needed - bk.ask.best())
                if bk.bid.best() < goal:
                    bk.add_limit("bid", min(goal, bk.ask.best() - 1), sim._lots(0))
            m2 = bk.mid2()
            sim.fair = m2 / 2  # the traders take the new price: it stays moved
            P["mid_move_ticks"] = (m2 - state["mid2"]) / 2
            P["required_move_ticks"] = round(needed, 3)
            P["move_bound_ticks"] = round(max(1.0, 0.5 * sim.sigma), 3)  # DETECTION.md's max(1 tick, 0.5 sigma)
            P["move_ms"] = ms2
            rec.act(ms2)
            _finish(sim, rec, ms2 + 1)
        sim.schedule(move_at, move)
    if not P["executed_share"] and P.get("near_miss") != "rest_ms":
        _watch(sim, rec, build_end + 2000, pull_at, begin_pull)

    def peg(ms):
        # the price drifting away would carry the depth out of the top 10: follow it
        if ms >= pull_at - 300 or "resting_at_pull" in P:
            return
        for o, _, _ in rec.orders:
            if o.lots and side.rank_of(o.tick) > 10:
                tick = side.tick_at_rank(r.randint(3, 8))
                if tick is not None and tick != o.tick:
                    bk.move_own(o, tick)
        sim.schedule(ms + 500, peg)
    sim.schedule(build_end + 500, peg)
    sim.schedule(pull_at, begin_pull)


SCRIPTS = {"layering": layering, "flipping": flipping, "vacuuming": vacuuming}
