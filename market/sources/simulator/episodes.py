"""Labelled episodes: the spoofing schemes of DETECTION.md, their near misses and the hard
negatives, drawn per minute from their own hash (`draw_episode`) and played into a
minute's book as timed actions (`episode_actions`), one function per kind."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NamedTuple

from market.bars import MINUTE_MS
from market.sources.events import PairRef

from .flow import stable_hash
from .profiles import _grid_index, _level_shape

if TYPE_CHECKING:
    from .block import _Block
    from .book import _Book
    from .profiles import _Profile
    from .source import SimulatorSource


_FOLLOW_MS = 500  # how often a depth episode moves orders the touch left behind back into view


SCHEMES = ("layering", "flipping", "vacuuming")
HARD_NEGATIVES = ("filled_wall", "quote_refresh", "iceberg", "patient_far", "two_sided_pull", "sweep")
# direction of the price move each scheme pushes toward, by the side of the fake liquidity
_DIRECTION = {
    ("layering", "bid"): "up", ("layering", "ask"): "down",
    ("flipping", "bid"): "up", ("flipping", "ask"): "down",
    ("vacuuming", "bid"): "down", ("vacuuming", "ask"): "up",
}
NEAR_MISS_SHARE = 0.25  # of random spoofing episodes: one threshold broken on purpose
# a clear aggressive flip trades at least this many typical taker seconds (DETECTION.md's 3,
# with the room the other clear parameters have)
CLEAR_FLIP_TAKER_SECONDS = 3.6
# the one parameter a near miss breaks, by scheme (see _draw_episode)
_NEAR_MISSES = {
    "layering": ("layers", "size_ratio", "build_ms", "collapse_ms", "cancel_fraction"),
    "flipping": ("size_ratio", "life_ms", "cancel_fraction", "flip_latency_ms", "flip_ratio"),
    "vacuuming": ("depth_multiplier", "rest_ms", "pull_ms", "pull_fraction"),
}
_MAX_SPAN_MIN = 11  # episodes end at most this many minutes after the minute they start in


@dataclass
class Episode:
    """A labelled episode. scheme is one of SCHEMES for a spoofing episode, None for a
    hard negative (then `kind` names it). side: where the (fake) liquidity stood, "bid",
    "ask" or "both" (two-sided negatives). direction: "up"/"down" as DETECTION.md reads
    it, None for negatives. Times in epoch ms: start (first add), collapse_start (first
    pull / fill / refresh), end (last action of the episode)."""

    scheme: str | None
    side: str
    direction: str | None
    start_ms: int
    collapse_start_ms: int
    end_ms: int
    parameters: dict = field(default_factory=dict)
    kind: str = ""
    pair: PairRef | None = None

    def __post_init__(self):
        if self.scheme is not None:
            if self.scheme not in SCHEMES:
                raise ValueError(f"unknown scheme {self.scheme!r}")
            self.kind = self.scheme
        if self.side not in ("bid", "ask", "both") or (self.scheme is not None and self.side == "both"):
            raise ValueError(f"side must be 'bid' or 'ask' ('both' for two-sided negatives), got {self.side!r}")
        if self.scheme is None and self.kind not in HARD_NEGATIVES:
            raise ValueError(f"unknown hard negative kind {self.kind!r}")
        if self.direction is None and self.scheme is not None:
            self.direction = _DIRECTION[(self.scheme, self.side)]
        if not self.start_ms <= self.collapse_start_ms <= self.end_ms:
            raise ValueError("need start_ms <= collapse_start_ms <= end_ms")

    @property
    def is_spoof(self) -> bool:
        return self.scheme is not None


# ---------------------------------------------------------------------------------
# drawing an episode
# ---------------------------------------------------------------------------------


def _lu(rng: random.Random, lo: float, hi: float) -> float:
    """Log-uniform draw."""
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _fracs(rng: random.Random, n: int) -> list[float]:
    """n sorted fractions of an interval, the first 0 and the last 1 (n >= 1)."""
    if n <= 1:
        return [0.0]
    inner = sorted(rng.random() for _ in range(n - 2))
    return [0.0, *[round(x, 4) for x in inner], 1.0]


def _draw_episode(kind: str, rng: random.Random, prof: _Profile, t0: int, src: SimulatorSource,
                  near_miss_share: float = NEAR_MISS_SHARE) -> Episode:
    """A random episode of `kind` starting in the minute at t0. Parameters are drawn
    wider than DETECTION.md's starting thresholds so detectors meet near misses too."""
    side = "bid" if rng.random() < 0.5 else "ask"
    p: dict = {}
    # everything ends by this offset in the minute (vacuuming earlier: the move into the
    # gap needs a few seconds before the minute's impact tapers off)
    last = 50_000 if kind == "vacuuming" else 57_000
    if kind in SCHEMES:
        # Most episodes are clear cases of DETECTION.md's definition (every parameter inside
        # its threshold, with room); NEAR_MISS_SHARE of them break exactly one threshold on
        # purpose (parameters["near_miss"] names it) so detectors meet near misses too.
        miss = rng.choice(_NEAR_MISSES[kind]) if rng.random() < near_miss_share else None
        p["near_miss"] = miss
    if kind == "layering":
        n = 2 if miss == "layers" else rng.randint(3, 6)
        sc = prof.tick_scale
        ratios = [round(_lu(rng, 6.0, 25.0), 3) for _ in range(n)]
        if miss == "size_ratio":
            ratios = [round(_lu(rng, 2.0, 4.0), 3) for _ in range(n)]
        p.update(layers=n, distances_ticks=sorted({max(1, round(d * sc)) for d in rng.sample(range(1, 24), n)}),
                 size_ratios=ratios,
                 build_ms=int(_lu(rng, 4500, 9000) if miss == "build_ms" else _lu(rng, 300, 2500)),
                 hold_ms=int(_lu(rng, 2000, 30000)),
                 collapse_ms=int(_lu(rng, 4000, 9000) if miss == "collapse_ms" else _lu(rng, 100, 800)),
                 cancel_fraction=round(rng.uniform(0.35, 0.55) if miss == "cancel_fraction" else rng.uniform(0.8, 1.0), 3),
                 opposite_trade=rng.random() < 0.6, opposite_ratio=round(_lu(rng, 0.3, 3.0), 3),
                 opposite_lead_ms=int(_lu(rng, 50, 1500)), add_fracs=_fracs(rng, n), cancel_fracs=_fracs(rng, n))
        p["layers"] = len(p["distances_ticks"])  # distances collapse on coarse grids
        del p["size_ratios"][p["layers"]:]
        del p["add_fracs"][p["layers"]:]
        del p["cancel_fracs"][p["layers"]:]
        # DETECTION.md's large add is also >= 15 % of the side's top-20 depth
        p["depth_share"] = round(_lu(rng, 0.03, 0.1) if miss == "size_ratio" else _lu(rng, 0.17, 0.4), 3)
        span = [p["build_ms"], p["hold_ms"], p["collapse_ms"]]
    elif kind == "flipping":
        mode = "aggressive" if rng.random() < 0.5 else "mirror"
        if miss == "flip_ratio":
            flip_ratio = _lu(rng, 0.03, 0.1) if mode == "aggressive" else _lu(rng, 0.1, 0.35)
        else:
            flip_ratio = _lu(rng, 0.35, 1.3) if mode == "aggressive" else _lu(rng, 0.65, 1.3)
        p.update(distance_ticks=round(rng.randint(0, 2) * prof.tick_scale),
                 size_ratio=round(_lu(rng, 2.0, 4.0) if miss == "size_ratio" else _lu(rng, 6.0, 25.0), 3),
                 life_ms=int(_lu(rng, 20000, 40000) if miss == "life_ms" else _lu(rng, 300, 9000)),
                 cancel_fraction=round(rng.uniform(0.4, 0.65) if miss == "cancel_fraction" else rng.uniform(0.85, 1.0), 3),
                 flip_latency_ms=int(_lu(rng, 2500, 6000) if miss == "flip_latency_ms" else _lu(rng, 20, 700)),
                 flip_mode=mode, flip_ratio=round(flip_ratio, 3), mirror_rest_ms=int(_lu(rng, 1000, 15000)))
        p["depth_share"] = round(_lu(rng, 0.03, 0.1) if miss == "size_ratio" else _lu(rng, 0.17, 0.4), 3)
        if mode == "aggressive":
            # half the aggressive flips are split into 2-4 taker orders, all printed within
            # 750 ms of the pull (drawn from their own hash: the episode's other draws stay)
            split = random.Random(stable_hash("flip-split", prof.pair, t0, side))
            orders = split.choice((1, 1, 1, 2, 3, 4)) if split.random() < 0.6 else 1
            p["flip_orders"] = orders
            if orders > 1:
                p["flip_spread_ms"] = int(split.uniform(40, max(50, 750 - p["flip_latency_ms"])))
                p["flip_parts"] = [round(split.uniform(0.5, 1.5), 3) for _ in range(orders)]
        if p["distance_ticks"] == 0:
            # half the spoofs at the touch improve it by a tick, so the order stands
            # alone at the best level and its cancel empties that level (drawn from their
            # own hash: the episode's other draws stay)
            alone = random.Random(stable_hash("flip-alone", prof.pair, t0, side))
            p["alone_at_best"] = alone.random() < 0.5
        span = [0, p["life_ms"], p["flip_latency_ms"]]
    elif kind in ("vacuuming", "two_sided_pull", "sweep"):
        levels = rng.randint(3, 10)
        miss = p.get("near_miss")
        p.update(levels=levels, depth_multiplier=round(_lu(rng, 1.15, 1.35) if miss == "depth_multiplier" else _lu(rng, 2.6, 5.0), 3),
                 build_ms=int(_lu(rng, 200, 8000)),
                 rest_ms=int(_lu(rng, 300, 1200) if miss == "rest_ms" else _lu(rng, 2500, 25000)),
                 chunks=rng.randint(levels, 2 * levels))
        p["chunk_fracs"] = _fracs(rng, p["chunks"])
        p["chunk_levels"] = [rng.randrange(levels) for _ in range(p["chunks"])]
        if kind == "vacuuming":
            p.update(pull_ms=int(_lu(rng, 3000, 6000) if miss == "pull_ms" else _lu(rng, 100, 800)),
                     pull_fraction=round(rng.uniform(0.2, 0.4) if miss == "pull_fraction" else rng.uniform(0.75, 1.0), 3),
                     kick_sigma=round(_lu(rng, 0.8, 4.0), 3))
            span = [p["build_ms"], p["rest_ms"], p["pull_ms"]]
        elif kind == "two_sided_pull":
            side = "both"
            p.update(pull_ms=int(_lu(rng, 100, 1000)), pull_fraction=round(rng.uniform(0.5, 1.0), 3))
            span = [p["build_ms"], p["rest_ms"], p["pull_ms"]]
        else:
            p.update(sweep_fraction=round(rng.uniform(0.6, 1.0), 3))
            span = [p["build_ms"], p["rest_ms"], 0]
        p["pull_fracs"] = _fracs(rng, p["chunks"])
    elif kind == "filled_wall":
        p.update(distance_ticks=round(rng.randint(0, 3) * prof.tick_scale), size_ratio=round(_lu(rng, 3.0, 20.0), 3),
                 rest_ms=int(_lu(rng, 500, 10000)), fill_ms=int(_lu(rng, 200, 8000)),
                 fill_chunks=rng.randint(2, 8), fill_fraction=round(rng.uniform(0.8, 1.0), 3))
        span = [0, p["rest_ms"], p["fill_ms"]]
    elif kind == "quote_refresh":
        n = rng.randint(3, 12)
        p.update(size_ratio=round(_lu(rng, 2.0, 10.0), 3), refreshes=n, interval_ms=int(_lu(rng, 200, 2000)),
                 latency_ms=rng.randint(0, 50), shifts=[rng.choice((-1, 0, 0, 1)) for _ in range(n)])
        span = [0, p["interval_ms"], p["interval_ms"] * (n - 1)]
    elif kind == "iceberg":
        n = rng.randint(3, 10)
        p.update(display_ratio=round(_lu(rng, 1.0, 3.0), 3), refills=n, refill_ms=int(_lu(rng, 20, 300)),
                 gap_ms=int(_lu(rng, 300, 3000)))
        span = [0, p["gap_ms"], p["gap_ms"] * (n - 1) + p["refill_ms"]]
    elif kind == "patient_far":
        p.update(distance_frac=round(rng.uniform(0.003, 0.01), 5), size_ratio=round(_lu(rng, 5.0, 30.0), 3),
                 life_ms=int(_lu(rng, 90_000, 600_000)))
        start = t0 + int(rng.uniform(0, 59_000))
        _patient_resolve(p, side, start, prof, src)
        end = start + p["life_ms"]
        return Episode(None, side, None, start, end, end, p, kind, prof.pair)
    else:
        raise ValueError(f"unknown episode kind {kind!r}")
    total = sum(span)
    if total > last - 1000:  # shrink the resting part to fit the minute
        span[1] = max(0, span[1] - (total - (last - 1000)))
        total = sum(span)
    start = t0 + int(rng.uniform(1000, last - total))
    if kind == "layering":
        p["hold_ms"] = span[1]
        collapse = start + span[0] + span[1]
        end = collapse + span[2]
    elif kind in ("flipping", "filled_wall", "quote_refresh", "iceberg"):
        collapse = start + span[1]
        end = collapse + span[2]
    else:
        p["rest_ms"] = span[1]
        collapse = start + span[0] + span[1]
        end = collapse + span[2]
    scheme = kind if kind in SCHEMES else None
    p["tick_scale"] = round(prof.tick_scale, 3)
    return Episode(scheme, side, None, start, collapse, end, p, kind, prof.pair)


def _patient_resolve(p: dict, side: str, start: int, prof: _Profile, src: SimulatorSource) -> None:
    """Absolute tick and size of a patient far order: functions of its start time only."""
    mid = src._mid(prof, start)
    rt = mid / prof.tick
    d = p["distance_frac"] * rt
    p["tick"] = math.floor(rt - d) if side == "bid" else math.ceil(rt + d)
    p["price"] = round(p["tick"] * prof.tick, prof.pdec)
    level = prof.level_usd * _level_shape(_grid_index(d, prof.grid)) / (mid * prof.usd_quote * prof.lot)
    p["lots"] = max(1, int(p["size_ratio"] * level))
    p["qty"] = round(p["lots"] * prof.lot, prof.qdec)


def _with_defaults(ep: Episode, prof: _Profile, src: SimulatorSource) -> Episode:
    """An explicit episode with the parameters it does not give drawn deterministically."""
    rng = random.Random(stable_hash("explicit", src.seed, prof.key, ep.start_ms, ep.kind))
    drawn = _draw_episode(ep.kind, rng, prof, ep.start_ms - ep.start_ms % MINUTE_MS, src, near_miss_share=0.0)
    params = {**drawn.parameters, **ep.parameters}
    side = ep.side
    if ep.kind == "patient_far" and ("tick" not in ep.parameters or "lots" not in ep.parameters):
        params.pop("tick", None)
        params.pop("lots", None)
        _patient_resolve(params, side, ep.start_ms, prof, src)
    if ep.kind == "layering":
        n = params["layers"]
        for key in ("distances_ticks", "size_ratios", "add_fracs", "cancel_fracs"):
            if len(params[key]) != n:
                params[key] = (list(params[key]) * n)[:n] if params[key] else drawn.parameters[key][:n]
    return Episode(ep.scheme, side, ep.direction, ep.start_ms, ep.collapse_start_ms, ep.end_ms, params, ep.kind,
                   prof.pair)


# ---------------------------------------------------------------------------------
# playing an episode into a block
# ---------------------------------------------------------------------------------


class _Stage(NamedTuple):
    """What an episode's actions play on: the minute's block, its book, and when each part
    happens."""

    blk: _Block
    book: _Book
    ep: Episode
    at: Callable[[float, Callable[[], object]], None]  # at(ts_ms, fn): fn runs at ts_ms if inside the block
    is_bid: bool
    sign_in: int  # -1 for bids, 1 for asks: away from the touch, into the book


def _episode_actions(blk: _Block, ep: Episode) -> list:
    """(offset ms in the block, seq, callable) for the parts of ep inside this block."""
    t0 = blk.t0
    acts: list = []

    def at(ts_ms: float, fn) -> None:
        off = ts_ms - t0
        if 0 <= off < MINUTE_MS:
            acts.append((float(off), 0, fn))

    is_bid = ep.side == "bid"
    _PLAYS[ep.kind](_Stage(blk, blk.book, ep, at, is_bid, -1 if is_bid else 1))

    # unique sequence numbers keep equal-time actions in creation order
    base = blk.seq_actions
    acts = [(off, base + i, fn) for i, (off, _s, fn) in enumerate(acts)]
    blk.seq_actions = base + len(acts)
    return acts


def _play_layering(stage: _Stage) -> None:
    blk, p, at, is_bid, sign_in = stage.blk, stage.ep.parameters, stage.at, stage.is_bid, stage.sign_in
    book = stage.book
    start, collapse, end = stage.ep.start_ms, stage.ep.collapse_start_ms, stage.ep.end_ms
    orders: list = []
    build = min(p["build_ms"], max(0, collapse - start))
    for i in range(p["layers"]):
        d, ratio = p["distances_ticks"][i], p["size_ratios"][i]

        def add(d=d, ratio=ratio):
            touch = blk.best(is_bid)
            lots = blk.large_lots(is_bid, d, ratio, p.get("depth_share", 0.0))
            orders.append(book.place(is_bid, touch + sign_in * d, lots))

        at(start + p["add_fracs"][i] * build, add)
    if p.get("opposite_trade"):
        at(max(start + build, collapse - p["opposite_lead_ms"]),
           lambda: book.market(not is_bid, int(p["opposite_ratio"] * blk.trade_lots) + 1))
    for i in range(p["layers"]):
        def cancel(i=i):
            blk.note_resting(stage.ep, orders)
            if i < len(orders):
                book.pull(orders[i], p["cancel_fraction"])

        at(collapse + p["cancel_fracs"][i] * (end - collapse), cancel)


def _play_flipping(stage: _Stage) -> None:
    blk, p, at, is_bid, sign_in = stage.blk, stage.ep.parameters, stage.at, stage.is_bid, stage.sign_in
    book = stage.book
    start, collapse, end, t0 = stage.ep.start_ms, stage.ep.collapse_start_ms, stage.ep.end_ms, stage.blk.t0
    box: list = []

    def add():
        touch = blk.best(is_bid)
        # alone at the best: one tick inside the spread (place() keeps it off the other side)
        tick = touch - sign_in if p.get("alone_at_best") else touch + sign_in * p["distance_ticks"]
        box.append(book.place(is_bid, tick, blk.large_lots(is_bid, p["distance_ticks"], p["size_ratio"],
                                                           p.get("depth_share", 0.0))))

    def cancel():
        blk.note_resting(stage.ep, box[:1])
        if box:
            book.pull(box[0], p["cancel_fraction"])

    def flip(share=1.0):
        if not box:
            return
        lots = p["flip_ratio"] * box[0].orig
        if p["flip_mode"] == "aggressive" and p.get("near_miss") != "flip_ratio":
            # DETECTION.md's aggressive flip is also >= 3 typical taker seconds
            lots = max(lots, CLEAR_FLIP_TAKER_SECONDS * blk.usual_taker_second())
        lots = int(share * lots) + 1
        if p["flip_mode"] == "aggressive":
            book.market(not is_bid, lots)  # a bid spoof flips to selling
        else:
            box.append(book.place(not is_bid, blk.best(not is_bid), lots))

    def mirror_pull():
        if len(box) > 1:
            book.pull(box[1])

    at(start, add)
    at(collapse, cancel)
    parts = p.get("flip_parts") or [1.0]
    for n, part in enumerate(parts):  # a split flip: several taker orders
        offset = p.get("flip_spread_ms", 0) * n / max(len(parts) - 1, 1)
        at(end + offset, lambda share=part / sum(parts): flip(share))
    if p["flip_mode"] == "mirror" and end + p["mirror_rest_ms"] - t0 < MINUTE_MS - 1000:
        at(end + p["mirror_rest_ms"], mirror_pull)


def _play_depth_pull(stage: _Stage) -> None:
    blk, p, at, is_bid = stage.blk, stage.ep.parameters, stage.at, stage.is_bid
    book = stage.book
    kind, start, collapse, end = stage.ep.kind, stage.ep.start_ms, stage.ep.collapse_start_ms, stage.ep.end_ms
    sides = (True, False) if kind == "two_sided_pull" else (is_bid,)
    placed: dict = {s: [] for s in sides}
    build = min(p["build_ms"], max(0, collapse - start))
    state: dict = {}

    def chunk(i):
        for s in sides:
            if s not in state:
                # the side's top-10 depth becomes depth_multiplier x its usual depth (what a
                # rolling baseline of the book sees), however thin or deep it is right now
                usual = blk.usual_lots("top10")
                m = p["depth_multiplier"]
                state[s] = max((m - 1.0) * usual, m * usual - book.top_depth(s)) / p["chunks"]
            # on the chunk_levels[i]-th visible level of the side: inside its top 10
            keys = book.bid_ticks if s else book.ask_ticks
            k = min(p["chunk_levels"][i], len(keys) - 1)
            tk = (keys[-1 - k] if s else keys[k]) if keys else blk.best(s)
            placed[s].append(book.place(s, tk, state[s] + 1))

    for i in range(p["chunks"]):
        at(start + p["chunk_fracs"][i] * build, lambda i=i: chunk(i))

    def follow_touch():
        # Whoever shows the depth wants it seen: an order the touch has left behind
        # (outside the side's ten best levels, where the imbalance it causes pushes
        # price) is moved back to its level index, as a pegged order would be.
        for s in sides:
            keys = book.bid_ticks if s else book.ask_ticks
            if len(keys) <= 10:
                continue
            edge = keys[-10] if s else keys[9]
            for i, o in enumerate(placed[s]):
                if o.rem > 0 and (o.tick < edge if s else o.tick > edge):
                    k = min(p["chunk_levels"][i], len(keys) - 1)
                    placed[s][i] = book.move(o, keys[-1 - k] if s else keys[k]) or o

    for t_follow in range(start + build + _FOLLOW_MS, collapse, _FOLLOW_MS):
        at(t_follow, follow_touch)
    if kind == "sweep":
        def sweep():
            s = is_bid
            levels, keys = book.side(s)
            top = keys[-p["levels"]:] if s else keys[:p["levels"]]
            lots = int(sum(levels[t] for t in top) * p["sweep_fraction"]) + 1
            book.market(not s, lots)

        at(collapse, sweep)
    else:
        n = p["chunks"]
        for i in range(n):
            def pull(i=i):
                blk.note_resting(stage.ep, [o for s in sides for o in placed[s]])
                for s in sides:
                    for o in placed[s][i::n]:
                        book.pull(o, p["pull_fraction"])

            at(collapse + p["pull_fracs"][i] * (end - collapse), pull)
        if kind == "vacuuming":
            def kick():
                # price moves into the gap: takers clear the two levels left at the
                # touch, and the fair price follows (at least a few ticks, so that
                # the move shows on coarse-tick pairs too)
                size = max(p["kick_sigma"] * blk.sig_s * math.sqrt(5.0), 3.0 / blk.r)
                blk.impact += (-1 if is_bid else 1) * size
                # ... and every level the new fair price has passed, the remnants of
                # the pulled orders included (they would otherwise pin the book)
                fair = blk.r * math.exp((-1 if is_bid else 1) * size)
                levels, keys = book.side(is_bid)
                passed = [t for t in keys[-20:] if t > fair] if is_bid else [t for t in keys[:20] if t < fair]
                near = keys[-2:] if is_bid else keys[:2]
                book.market(not is_bid, sum(levels[t] for t in set(near) | set(passed)) + 1)

            at(end + 150, kick)  # the move follows the pull


def _play_filled_wall(stage: _Stage) -> None:
    blk, p, at, is_bid, sign_in = stage.blk, stage.ep.parameters, stage.at, stage.is_bid, stage.sign_in
    book = stage.book
    start, collapse, end = stage.ep.start_ms, stage.ep.collapse_start_ms, stage.ep.end_ms
    box = []

    def add():
        touch = blk.best(is_bid)
        box.append(book.place(is_bid, touch + sign_in * p["distance_ticks"],
                              p["size_ratio"] * blk.typical_lots(is_bid, p["distance_ticks"])))

    at(start, add)
    n = p["fill_chunks"]
    for i in range(n):
        def fill(i=i):
            if not box or box[0].rem <= 0:
                return
            o = box[0]
            ahead = book.queue_ahead(o)
            want = o.orig * p["fill_fraction"] * (i + 1) / n - o.filled
            if want > 0:
                book.market(not is_bid, int(ahead + want) + 1, keep_levels=1)

        at(collapse + (end - collapse) * i / max(1, n - 1), fill)


def _rest_at_touch(blk: _Block, is_bid: bool, size_ratio: float, box: list) -> None:
    """Rest an order at the best price, size_ratio times the usual size there; keep it in box."""
    box.append(blk.book.place(is_bid, blk.best(is_bid), size_ratio * blk.typical_lots(is_bid, 0)))


def _play_quote_refresh(stage: _Stage) -> None:
    blk, p, at, is_bid, sign_in = stage.blk, stage.ep.parameters, stage.at, stage.is_bid, stage.sign_in
    book = stage.book
    start, collapse, end = stage.ep.start_ms, stage.ep.collapse_start_ms, stage.ep.end_ms
    box = []
    at(start, lambda: _rest_at_touch(blk, is_bid, p["size_ratio"], box))
    n = p["refreshes"]
    for i in range(n):
        t_refresh = collapse + (end - collapse) * i / max(1, n - 1)

        def withdraw():
            if box:
                book.pull(box[-1])

        def requote(i=i):
            touch = blk.best(is_bid)
            shift = p["shifts"][i]  # +1: one tick more aggressive, -1: one tick back
            tk = touch - sign_in * shift
            size = p["size_ratio"] * blk.typical_lots(is_bid, 0) * (0.8 + 0.04 * ((i * 7919) % 11))
            box.append(book.place(is_bid, tk, size))

        at(t_refresh, withdraw)
        at(t_refresh + p["latency_ms"], requote)


def _play_iceberg(stage: _Stage) -> None:
    blk, p, at, is_bid = stage.blk, stage.ep.parameters, stage.at, stage.is_bid
    book = stage.book
    start, collapse = stage.ep.start_ms, stage.ep.collapse_start_ms
    box = []
    at(start, lambda: _rest_at_touch(blk, is_bid, p["display_ratio"], box))
    n = p["refills"]
    for i in range(n):
        t_round = collapse + p["gap_ms"] * i

        def hit():
            if not box:
                return
            o = box[-1]
            if o.rem <= 0:
                return
            book.market(not is_bid, int(book.queue_ahead(o) + o.rem), keep_levels=1)

        def refill():
            if box:
                o = box[-1]
                box.append(book.place(is_bid, o.tick, o.orig))

        at(t_round, hit)
        at(t_round + p["refill_ms"], refill)


def _play_patient_far(stage: _Stage) -> None:
    book, p, at, is_bid = stage.book, stage.ep.parameters, stage.at, stage.is_bid
    start, end, t0 = stage.ep.start_ms, stage.ep.end_ms, stage.blk.t0
    box = []
    if start < t0:  # resting since an earlier block: part of this block's snapshot
        box.append(book.place(is_bid, p["tick"], p["lots"]))
    else:
        at(start, lambda: box.append(book.place(is_bid, p["tick"], p["lots"])))
    at(end, lambda: [book.pull(o) for o in box])


# one function per kind of episode
_PLAYS = {
    "layering": _play_layering,
    "flipping": _play_flipping,
    "vacuuming": _play_depth_pull,
    "two_sided_pull": _play_depth_pull,
    "sweep": _play_depth_pull,
    "filled_wall": _play_filled_wall,
    "quote_refresh": _play_quote_refresh,
    "iceberg": _play_iceberg,
    "patient_far": _play_patient_far,
}
