"""Offline evaluation of the scheme detectors on labelled market episodes. Plain Python.

    evaluate(seeds=[101, 102, 103], pairs=[PairRef("binance", "BTC", "USDT")], hours_per_seed=1)

For each (seed, pair) a labelled market (`market`: the simulator, SimulatorSource, or the
second market written apart from it, SecondMarketSource; MARKETS) is run for
`hours_per_seed` hours after a warm-up (detections during the warm-up are ignored). A detection matches a labelled spoofing episode of the same scheme (either side:
direction accuracy is then measured, not implied) when its time is within
[collapse_start_ms, end_ms + 5 s] (a detection before the episode's first pull cannot be of
it). Episodes are clear cases of DETECTION.md's definition or near
misses that break one threshold on purpose (parameters["near_miss"]): recall counts clear
episodes; a detection of a near miss is reported on its own and is neither a true nor a
false positive. An episode drawn clear that did not happen as drawn is counted as disrupted,
outside recall, and a detection of it is neither a true nor a false positive
(`recall_with_disrupted` counts them back in: missed unless flagged). The source judges it:
`src.disrupted(pair, episode)` gives the reason (truthy) or None; the second market applies
DETECTION.md's thresholds to what its scripts recorded (market/sources/second_market/judge.py).
A source without `disrupted` (the simulator) keeps the first rule: less than DISRUPTED_BELOW of
what the episode placed still rested when its pull began (`resting_at_pull`), so takers
filled it first. Each scheme's summary counts the reasons ("disrupted_reasons", a reason's
text before " (", an episode counted under each threshold it broke); with details, "DS"
rows (disrupted, flagged) and "DN" rows (disrupted, not flagged) end with the reason. Later
detections of the same episode are duplicates (false positives).
Every other detection is a false positive; those that match no spoofing episode are false
alarms (on background flow or a hard negative). Latency: detection time minus the instant
the episode became a whole case, `src.completed_ms(pair, episode)` where the source says
(the second market: the last of its collapse's thresholds met, judge.py), else its end_ms
(the simulator's episodes end with their collapse or flip).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from market.sources.events import BookDelta, BookSnapshot, PairRef
from market.sources.netting import net_depth
from market.sources.simulator import SCHEMES

from schemes.detectors import DetectorEngine

MATCH_SLACK_MS = 5_000
DEFAULT_START_MS = 1_717_419_600_000  # 2024-06-03 13:00 UTC (a Monday, busy hours)
HOUR_MS = 3_600_000
# less than this share of what an episode placed left to pull is no clear case: a lenient cut,
# DETECTION.md's pulls take 50 % (vacuuming) to 80 % (flipping) of what was shown
DISRUPTED_BELOW = 0.5
# the labelled markets the detectors are measured on: the service's own simulator, and a second
# one written from DETECTION.md alone by someone who had read neither it nor the detectors
MARKETS = {"simulator": ("market.sources.simulator", "SimulatorSource"),
           "second_market": ("market.sources.second_market", "SecondMarketSource")}


def market_source(market: str, seed: int, episodes_per_hour: float, hard_negatives: bool | float):
    """The labelled source `market` (a key of MARKETS) for one seed."""
    from importlib import import_module

    module, name = MARKETS[market]
    return getattr(import_module(module), name)(seed, episodes_per_hour=episodes_per_hour,
                                                hard_negatives=hard_negatives)


@dataclass
class SchemeStats:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    dup: int = 0
    false_alarms: int = 0  # FP on hard negatives or on nothing
    misclassified: int = 0  # FP during a spoofing episode it is not of (another scheme, or before its collapse)
    near_misses: int = 0  # near-miss episodes (not in recall)
    near_miss_flagged: int = 0  # detections of them (neither TP nor FP)
    disrupted: int = 0  # episodes drawn clear that did not happen as drawn (disrupted_reason; not in recall)
    disrupted_flagged: int = 0  # detections of them (neither TP nor FP)
    direction_ok: int = 0
    latencies: list = field(default_factory=list)
    disrupted_reasons: Counter = field(default_factory=Counter)  # threshold -> disrupted episodes that broke it

    def merge(self, other: "SchemeStats") -> None:
        for name in ("tp", "fp", "fn", "dup", "false_alarms", "misclassified", "near_misses", "near_miss_flagged",
                     "disrupted", "disrupted_flagged", "direction_ok"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.latencies.extend(other.latencies)
        self.disrupted_reasons.update(other.disrupted_reasons)

    def summary(self, pair_hours: float) -> dict:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        # with the disrupted episodes back in: each one missed, unless it was flagged anyway
        everything = self.tp + self.fn + self.disrupted
        r_all = (self.tp + self.disrupted_flagged) / everything if everything else 0.0
        lat = sorted(self.latencies)
        return {
            "episodes": self.tp + self.fn, "detected": self.tp, "false_positives": self.fp,
            "precision": p, "recall": r, "recall_with_disrupted": r_all, "f1": f1,
            "direction_accuracy": self.direction_ok / self.tp if self.tp else 0.0,
            "false_alarms_per_pair_hour": self.false_alarms / pair_hours if pair_hours else 0.0,
            "misclassified": self.misclassified, "duplicates": self.dup,
            "near_misses": self.near_misses, "near_misses_flagged": self.near_miss_flagged,
            "disrupted": self.disrupted, "disrupted_flagged": self.disrupted_flagged,
            "disrupted_reasons": dict(sorted(self.disrupted_reasons.items())),
            "latency_p50_ms": _pct(lat, 0.5), "latency_p95_ms": _pct(lat, 0.95),
        }


def _pct(sorted_vals, q):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[i]


def disrupted_reason(src, pair: PairRef, episode) -> str | None:
    """Why a clear episode did not happen as drawn (None: it did). The source says so when it
    can (`disrupted`); otherwise the first rule: less than DISRUPTED_BELOW of what the episode
    placed still rested when its pull began."""
    judge = getattr(src, "disrupted", None)
    if judge is not None:
        return judge(pair, episode) or None
    share = src.resting_at_pull(pair, episode)
    if share is not None and share < DISRUPTED_BELOW:
        return f"resting at the pull < {100 * DISRUPTED_BELOW:.0f} % ({100 * share:.0f} %)"
    return None


def reason_thresholds(reason: str) -> list[str]:
    """The thresholds a reason names: each "; "-separated part up to its " (" (the value)."""
    return [part.split(" (")[0] for part in reason.split("; ")]


def _parse_pair(p) -> PairRef:
    if isinstance(p, PairRef):
        return p
    ex, base, quote = str(p).split("/")
    return PairRef(ex, base, quote)


def evaluate(seeds, pairs, hours_per_seed: float = 1.0, hard_negatives: bool | float = True, *,
             episodes_per_hour: float = 12.0, start_ms: int = DEFAULT_START_MS, warmup_ms: int = 5 * 60_000,
             details: bool = False, processes: int = 1, batch_ms: int = 0, market: str = "simulator") -> dict:
    """Run the detectors over simulated, labelled data; see the module docstring.
    processes > 1 runs the (seed, pair) combinations in that many worker processes.
    batch_ms > 0 nets the depth feed into batches of that length (`net_depth`), as
    exchanges publish it, and tells the engine so. market: which labelled source (MARKETS)."""
    pairs = [_parse_pair(p) for p in pairs]
    jobs = [(seed, pair, hours_per_seed, hard_negatives, episodes_per_hour, start_ms, warmup_ms, details, batch_ms,
             market) for seed in seeds for pair in pairs]
    if processes > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(processes) as pool:
            parts = pool.starmap(_evaluate_pair, jobs)
    else:
        parts = [_evaluate_pair(*job) for job in jobs]
    stats = {s: SchemeStats() for s in SCHEMES}
    updates, engine_s, rows = 0, 0.0, []
    for part_stats, part_updates, part_s, part_rows in parts:
        for s in SCHEMES:
            stats[s].merge(part_stats[s])
        updates += part_updates
        engine_s += part_s
        rows.extend(part_rows)
    pair_hours = hours_per_seed * len(jobs)
    out = {
        "market": market, "seeds": list(seeds), "pairs": [f"{p.exchange}/{p.base}/{p.quote}" for p in pairs],
        "hours_per_seed": hours_per_seed, "episodes_per_hour": episodes_per_hour, "pair_hours": pair_hours,
        "batch_ms": batch_ms,
        "schemes": {s: stats[s].summary(pair_hours) for s in SCHEMES},
        "book_updates": updates, "engine_seconds": engine_s,
        "throughput_updates_per_s": updates / engine_s if engine_s else 0.0,
    }
    if details:
        out["rows"] = rows
    return out


def _evaluate_pair(seed, pair, hours_per_seed, hard_negatives, episodes_per_hour, start_ms, warmup_ms, details,
                   batch_ms=0, market="simulator"):
    src = market_source(market, seed, episodes_per_hour, hard_negatives)
    stats = {s: SchemeStats() for s in SCHEMES}
    rows: list = []
    engine_s = 0.0
    updates = 0
    a = start_ms
    b = a + int(hours_per_seed * HOUR_MS)
    events = list(net_depth(src.events(pair, a - warmup_ms, b), batch_ms))
    eng = DetectorEngine(pair, tick_size=src.tick_size(pair), batch_ms=batch_ms)
    dets = []
    feed = eng.feed
    t0 = time.perf_counter()
    for ev in events:
        r = feed(ev)
        if r:
            dets.extend(r)
    engine_s += time.perf_counter() - t0
    updates += sum(len(e.bids) + len(e.asks) for e in events if type(e) in (BookDelta, BookSnapshot))
    dets = [d for d in dets if a <= d.ts_ms < b]
    eps = [e for e in src.episodes_between(pair, a, b) if a <= e.start_ms < b]
    spoofs = [e for e in eps if e.scheme]
    reasons = [None if e.parameters.get("near_miss") else disrupted_reason(src, pair, e) for e in spoofs]
    disrupted = {i for i, r in enumerate(reasons) if r}
    completed = getattr(src, "completed_ms", None)
    matched: set = set()
    for d in dets:
        st = stats[d.scheme]
        hit = None
        for i, e in enumerate(spoofs):
            if e.scheme == d.scheme and e.collapse_start_ms <= d.ts_ms <= e.end_ms + MATCH_SLACK_MS:
                if i not in matched:
                    hit = i
                    break
                hit = -1 if hit is None else hit
        if hit is not None and hit >= 0:
            matched.add(hit)
            e = spoofs[hit]
            if e.parameters.get("near_miss"):
                st.near_miss_flagged += 1
                if details:
                    rows.append(("NM", seed, pair.base, d.scheme, d.side, d.ts_ms, e.parameters["near_miss"],
                                 e.start_ms, e.end_ms))
                continue
            if hit in disrupted:
                st.disrupted_flagged += 1
                if details:
                    rows.append(("DS", seed, pair.base, d.scheme, d.side, d.ts_ms, e.kind, e.start_ms, e.end_ms,
                                 reasons[hit]))
                continue
            st.tp += 1
            st.direction_ok += d.direction == e.direction
            done = completed(pair, e) if completed else None
            st.latencies.append(d.ts_ms - (e.end_ms if done is None else done))
            if details:
                rows.append(("TP", seed, pair.base, d.scheme, d.side, d.ts_ms, e.kind, e.start_ms, e.end_ms))
            continue
        st.fp += 1
        if hit == -1:
            st.dup += 1
        other = [e for e in spoofs if e.start_ms <= d.ts_ms <= e.end_ms + MATCH_SLACK_MS]
        if other and hit != -1:
            st.misclassified += 1
        elif hit != -1:
            st.false_alarms += 1
        if details:
            near = [e for e in eps if e.start_ms - 1000 <= d.ts_ms <= e.end_ms + MATCH_SLACK_MS]
            rows.append(("FP", seed, pair.base, d.scheme, d.side, d.ts_ms,
                         ",".join(f"{e.kind}/{e.side}" for e in near) or "-", None, None))
    for i, e in enumerate(spoofs):
        if e.parameters.get("near_miss"):
            stats[e.scheme].near_misses += 1
            continue
        if i in disrupted:
            stats[e.scheme].disrupted += 1
            stats[e.scheme].disrupted_reasons.update(reason_thresholds(reasons[i]))
            if details and i not in matched:
                rows.append(("DN", seed, pair.base, e.scheme, e.side, None, e.kind, e.start_ms, e.end_ms,
                             reasons[i]))
            continue
        if i not in matched:
            stats[e.scheme].fn += 1
            if details:
                rows.append(("FN", seed, pair.base, e.scheme, e.side, None, e.kind, e.start_ms, e.end_ms,
                             e.parameters))
    return stats, updates, engine_s, rows


def markdown_table(result: dict) -> str:
    lines = ["| scheme | clear episodes | TP | FP (of which other scheme) | precision | recall | recall with disrupted | "
             "F1 | direction acc. | false alarms / pair-hour | latency p50 (ms) | latency p95 (ms) | "
             "near misses flagged | disrupted (flagged) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s, m in result["schemes"].items():
        lines.append(
            f"| {s} | {m['episodes']} | {m['detected']} | {m['false_positives']} ({m['misclassified']}) | "
            f"{m['precision']:.3f} | {m['recall']:.3f} | {m['recall_with_disrupted']:.3f} | {m['f1']:.3f} | "
            f"{m['direction_accuracy']:.3f} | "
            f"{m['false_alarms_per_pair_hour']:.3f} | {m['latency_p50_ms']} | {m['latency_p95_ms']} | "
            f"{m['near_misses_flagged']} of {m['near_misses']} | {m['disrupted']} ({m['disrupted_flagged']}) |")
    lines.append("")
    lines.append(f"Throughput: {result['throughput_updates_per_s']:,.0f} book updates/s through the engine "
                 f"({result['book_updates']:,} updates in {result['engine_seconds']:.2f} s, one core).")
    return "\n".join(lines)
