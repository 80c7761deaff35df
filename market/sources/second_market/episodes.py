"""Episode labels, the parameters each spoofing scheme is drawn with, and the hour's plan.
Plain Python.

Every clear episode's parameters are drawn uniformly over the whole range DETECTION.md's
thresholds allow (an open-ended range gets a realistic upper bound); a near miss redraws
exactly one of them just outside its threshold and names it in parameters["near_miss"]."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import PairRef

SCHEMES = ("layering", "flipping", "vacuuming")
NEGATIVES = ("following_ladder", "iceberg", "quote_refresh", "filled_wall", "far_patient",
             "two_sided_pull", "sweep", "scroll_out")
NEAR_MISS_SHARE = 0.25
NEAR_MISSES = {
    "layering": ("n_levels", "build_ms", "behind_ticks", "removed_fraction", "collapse_window", "size_factor"),
    "flipping": ("touch_distance", "life_ms", "cancel_fraction", "flip_latency_ms", "flip_size", "size_factor"),
    "vacuuming": ("depth_ratio", "rest_ms", "pull_ms", "executed", "other_side", "removed_fraction"),
}


@dataclass(frozen=True)
class Episode:
    scheme: str | None
    kind: str
    side: str
    direction: str | None
    start_ms: int
    collapse_start_ms: int
    end_ms: int
    parameters: dict = field(default_factory=dict, compare=False, hash=False)
    pair: PairRef | None = None


def direction_of(scheme: str, side: str) -> str:
    """DETECTION.md: bid layers push up, a flipped bid spoof pushed up, pulled bids leave a
    hole below so vacuuming a bid reads down."""
    if scheme == "vacuuming":
        return "down" if side == "bid" else "up"
    return "up" if side == "bid" else "down"


class Record:
    """An episode while it runs: what it placed and when it acted."""

    def __init__(self, scheme, kind, side, params, pair):
        self.scheme, self.kind, self.side, self.params, self.pair = scheme, kind, side, params, pair
        self.orders: list = []  # (Order, distance ticks, distance levels)
        self.large: dict = {}  # Order -> DETECTION.md's large-add bound (lots) it was sized against
        # each pull action as it ran: (ms, lots it cancelled, lots takers had executed of the
        # episode's orders by then)
        self.pulls: list = []
        self.first = self.collapse = self.last = None
        self.done = False

    def act(self, ts: int, collapse: bool = False) -> None:
        if self.first is None:
            self.first = ts
        if collapse and self.collapse is None:
            self.collapse = ts
        self.last = ts if self.last is None else max(self.last, ts)

    def add(self, order, ticks: int, levels: int) -> None:
        self.orders.append((order, ticks, levels))
        self.act(order.placed_ms)

    def resting_share(self) -> float:
        placed = sum(o.placed for o, _, _ in self.orders)
        return sum(o.lots for o, _, _ in self.orders) / placed if placed else 0.0

    def episode(self, book) -> Episode | None:
        if self.first is None or self.collapse is None or not self.done:
            return None
        params = dict(self.params)
        params["orders"] = tuple(
            {"side": o.side, "price": book.price(o.tick), "qty": book.qty(o.placed), "placed_ms": o.placed_ms,
             "pulled_ms": o.pulled_ms, "filled": book.qty(o.filled), "cancelled": book.qty(o.cancelled),
             "distance_ticks": ticks, "distance_levels": levels, "tag": o.tag,
             "filled_by_pull_end": None if o.filled_by_pull_end is None else book.qty(o.filled_by_pull_end),
             "large_qty": None if o not in self.large else book.qty(self.large[o])}
            for o, ticks, levels in self.orders)
        params["pulls"] = tuple((ms, book.qty(lots), book.qty(filled)) for ms, lots, filled in self.pulls)
        direction = direction_of(self.scheme, self.side) if self.scheme else None
        return Episode(self.scheme, self.kind, self.side, direction, self.first, self.collapse, self.last,
                       params, self.pair)


# --- spoofing parameters -------------------------------------------------------------------
def _layering(r, near):
    n = r.randint(3, 7)
    p = {"n_levels": n, "build_ms": r.randint(100, 3000), "size_factor": r.uniform(1.1, 3.0),
         "rest_ms": r.randint(500, 45_000), "removed_fraction": r.uniform(0.7, 1.0),
         "cluster_share": r.uniform(0.6, 1.0), "cluster_ms": r.randint(50, 1000),
         "opposite_trade": r.random() < 0.6, "collapse_within_ms": 60_000}
    near_ticks = [("ticks", r.randint(1, 25)) for _ in range(2)]
    rest = [("ticks", r.randint(1, 25)) if r.random() < 0.5 else ("levels", r.randint(1, 5)) for _ in range(n - 2)]
    p["distances"] = near_ticks + rest
    if near == "n_levels":
        p["n_levels"] = 2
        p["distances"] = near_ticks
    elif near == "build_ms":
        p["build_ms"] = r.randint(4000, 9000)
    elif near == "behind_ticks":
        p["distances"] = [("ticks", r.randint(1, 25))] + [("ticks", r.randint(26, 60)) for _ in range(n - 1)]
    elif near == "removed_fraction":
        p["removed_fraction"] = r.uniform(0.3, 0.62)
    elif near == "collapse_window":
        p["rest_ms"] = r.randint(62_000, 120_000)
    elif near == "size_factor":
        p["size_factor"] = r.uniform(0.35, 0.85)
    p["duration_ms"] = p["build_ms"] + p["rest_ms"] + 61_000
    return p


def _flipping(r, near):
    pull_spread, flip_spread = r.randint(20, 300), r.randint(0, 150)
    p = {"touch_distance": r.randint(0, 2), "n_children": r.randint(2, 3), "size_factor": r.uniform(1.1, 3.0),
         "child_spread_ms": r.randint(20, 300), "life_ms": r.randint(300, 9500), "pull_spread_ms": pull_spread,
         "cancel_fraction": r.uniform(0.8, 1.0), "mode": r.choice(("aggressive", "mirror")),
         "flip_spread_ms": flip_spread, "flip_latency_ms": r.randint(0, 1000 - pull_spread - flip_spread - 1),
         "flip_factor": r.uniform(1.1, 2.5), "mirror_ratio": r.uniform(0.55, 1.5)}
    if near == "touch_distance":
        p["touch_distance"] = r.randint(3, 8)
    elif near == "life_ms":
        p["life_ms"] = r.randint(11_000, 30_000)
    elif near == "cancel_fraction":
        p["cancel_fraction"] = r.uniform(0.4, 0.72)
    elif near == "flip_latency_ms":
        p["flip_latency_ms"] = r.randint(1300, 4000)
    elif near == "flip_size":
        p["flip_factor"], p["mirror_ratio"] = r.uniform(0.3, 0.8), r.uniform(0.15, 0.42)
    elif near == "size_factor":
        p["size_factor"] = r.uniform(0.35, 0.85)
    p["duration_ms"] = p["child_spread_ms"] + p["life_ms"] + 6000
    return p


def _vacuuming(r, near):
    p = {"depth_ratio": r.uniform(1.5, 4.0), "n_children": r.randint(3, 6), "build_ms": r.randint(300, 4000),
         "rest_ms": r.randint(2000, 12_000), "removed_fraction": r.uniform(0.5, 1.0), "pull_ms": r.randint(20, 1000),
         "move_factor": r.uniform(1.0, 3.0), "move_delay_ms": r.randint(50, 3500),
         "executed_share": 0.0, "other_side_drop": 0.0}
    if near == "depth_ratio":
        p["depth_ratio"] = r.uniform(1.1, 1.4)
    elif near == "rest_ms":
        p["rest_ms"] = r.randint(300, 1800)
    elif near == "pull_ms":
        p["pull_ms"] = r.randint(1500, 4000)
    elif near == "executed":
        p["executed_share"] = r.uniform(0.3, 0.6)
    elif near == "other_side":
        p["other_side_drop"] = r.uniform(0.25, 0.5)
    elif near == "removed_fraction":
        p["removed_fraction"] = r.uniform(0.2, 0.45)
    p["duration_ms"] = p["build_ms"] + p["rest_ms"] + p["pull_ms"] + 8000
    return p


_DRAW = {"layering": _layering, "flipping": _flipping, "vacuuming": _vacuuming}


def draw_spoof(r, scheme: str) -> dict:
    near = r.choice(NEAR_MISSES[scheme]) if r.random() < NEAR_MISS_SHARE else None
    p = _DRAW[scheme](r, near)
    if near:
        p["near_miss"] = near
    return p


# --- the hour's plan -------------------------------------------------------------------------
def _arrivals(r, rate_per_hour: float, hour_ms: int) -> list[int]:
    out, t = [], 0.0
    if rate_per_hour <= 0:
        return out
    while True:
        t += r.expovariate(rate_per_hour) * hour_ms
        if t >= hour_ms:
            return out
        out.append(int(t))


def plan_hour(spoof_rng, neg_rng, rate: float, neg_rate: float, hour_ms: int, draw_negative) -> list[tuple]:
    """(offset_ms, scheme, kind, side, params) for the hour, never overlapping, all ending
    inside the hour: one episode at a time keeps every label unambiguous."""
    items = []
    for t in _arrivals(spoof_rng, rate, hour_ms):
        scheme = spoof_rng.choice(SCHEMES)
        items.append((t, scheme, scheme, spoof_rng.choice(("bid", "ask")), draw_spoof(spoof_rng, scheme)))
    for t in _arrivals(neg_rng, neg_rate, hour_ms):
        kind = neg_rng.choice(NEGATIVES)
        side = "both" if kind == "two_sided_pull" else neg_rng.choice(("bid", "ask"))
        items.append((t, None, kind, side, draw_negative(neg_rng, kind)))
    items.sort(key=lambda x: (x[0], x[2]))
    plan, free = [], 5000
    for t, scheme, kind, side, params in items:
        t = max(t, free)
        if t + params["duration_ms"] > hour_ms - 2000:
            continue
        plan.append((t, scheme, kind, side, params))
        free = t + params["duration_ms"] + 3000
    return plan
