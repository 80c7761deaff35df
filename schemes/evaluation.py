"""Offline evaluation of the scheme detectors on labelled simulator episodes. Plain Python.

    evaluate(seeds=[101, 102, 103], pairs=[PairRef("binance", "BTC", "USDT")], hours_per_seed=1)

For each (seed, pair) the simulator (SimulatorSource(seed, episodes_per_hour, hard_negatives))
is run for `hours_per_seed` hours after a warm-up (detections during the warm-up are
ignored). A detection matches a labelled spoofing episode of the same scheme and side when
its time is within [start_ms, end_ms + 5 s]; the first matching detection is a true
positive, later ones on the same episode are duplicates (counted as false positives too).
Every other detection is a false positive; those that match a hard-negative window (or
nothing) are false alarms. Latency: detection time - episode end_ms.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from market.sources.events import BookDelta, BookSnapshot, PairRef
from market.sources.simulator import SCHEMES, SimulatorSource

from schemes.detectors import DetectorEngine

MATCH_SLACK_MS = 5_000
DEFAULT_START_MS = 1_717_419_600_000  # 2024-06-03 13:00 UTC (a Monday, busy hours)
HOUR_MS = 3_600_000


@dataclass
class SchemeStats:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    dup: int = 0
    false_alarms: int = 0  # FP on hard negatives or on nothing
    misclassified: int = 0  # FP that matched an episode of another scheme / side
    direction_ok: int = 0
    latencies: list = field(default_factory=list)

    def summary(self, pair_hours: float) -> dict:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        lat = sorted(self.latencies)
        return {
            "episodes": self.tp + self.fn, "detected": self.tp, "false_positives": self.fp,
            "precision": p, "recall": r, "f1": f1,
            "direction_accuracy": self.direction_ok / self.tp if self.tp else 0.0,
            "false_alarms_per_pair_hour": self.false_alarms / pair_hours if pair_hours else 0.0,
            "misclassified": self.misclassified, "duplicates": self.dup,
            "latency_p50_ms": _pct(lat, 0.5), "latency_p95_ms": _pct(lat, 0.95),
        }


def _pct(sorted_vals, q):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[i]


def _parse_pair(p) -> PairRef:
    if isinstance(p, PairRef):
        return p
    ex, base, quote = str(p).split("/")
    return PairRef(ex, base, quote)


def evaluate(seeds, pairs, hours_per_seed: float = 1.0, hard_negatives: bool | float = True, *,
             episodes_per_hour: float = 12.0, start_ms: int = DEFAULT_START_MS, warmup_ms: int = 5 * 60_000,
             details: bool = False) -> dict:
    """Run the detectors over simulated, labelled data; see the module docstring."""
    pairs = [_parse_pair(p) for p in pairs]
    stats = {s: SchemeStats() for s in SCHEMES}
    updates = 0
    engine_s = 0.0
    pair_hours = 0.0
    rows = []
    for seed in seeds:
        src = SimulatorSource(seed, episodes_per_hour=episodes_per_hour, hard_negatives=hard_negatives)
        for pair in pairs:
            a = start_ms
            b = a + int(hours_per_seed * HOUR_MS)
            events = list(src.events(pair, a - warmup_ms, b))
            eng = DetectorEngine(pair, tick_size=src.tick_size(pair))
            dets = []
            feed = eng.feed
            t0 = time.perf_counter()
            for ev in events:
                r = feed(ev)
                if r:
                    dets.extend(r)
            engine_s += time.perf_counter() - t0
            updates += sum(len(e.bids) + len(e.asks) for e in events if type(e) in (BookDelta, BookSnapshot))
            pair_hours += hours_per_seed
            dets = [d for d in dets if a <= d.ts_ms < b]
            eps = [e for e in src.episodes_between(pair, a, b) if a <= e.start_ms < b]
            spoofs = [e for e in eps if e.scheme]
            negs = [e for e in eps if not e.scheme]
            matched: set = set()
            for d in dets:
                st = stats[d.scheme]
                hit = None
                for i, e in enumerate(spoofs):
                    if e.scheme == d.scheme and e.side == d.side and e.start_ms <= d.ts_ms <= e.end_ms + MATCH_SLACK_MS:
                        if i not in matched:
                            hit = i
                            break
                        hit = -1 if hit is None else hit
                if hit is not None and hit >= 0:
                    matched.add(hit)
                    e = spoofs[hit]
                    st.tp += 1
                    st.direction_ok += d.direction == e.direction
                    st.latencies.append(d.ts_ms - e.end_ms)
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
                if i not in matched:
                    stats[e.scheme].fn += 1
                    if details:
                        rows.append(("FN", seed, pair.base, e.scheme, e.side, None, e.kind, e.start_ms, e.end_ms,
                                     e.parameters))
            _ = negs
    out = {
        "seeds": list(seeds), "pairs": [f"{p.exchange}/{p.base}/{p.quote}" for p in pairs],
        "hours_per_seed": hours_per_seed, "episodes_per_hour": episodes_per_hour, "pair_hours": pair_hours,
        "schemes": {s: stats[s].summary(pair_hours) for s in SCHEMES},
        "book_updates": updates, "engine_seconds": engine_s,
        "throughput_updates_per_s": updates / engine_s if engine_s else 0.0,
    }
    if details:
        out["rows"] = rows
    return out


def markdown_table(result: dict) -> str:
    lines = ["| scheme | episodes | TP | FP | precision | recall | F1 | direction acc. | false alarms / pair-hour | "
             "latency p50 (ms) | latency p95 (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s, m in result["schemes"].items():
        lines.append(
            f"| {s} | {m['episodes']} | {m['detected']} | {m['false_positives']} | {m['precision']:.3f} | "
            f"{m['recall']:.3f} | {m['f1']:.3f} | {m['direction_accuracy']:.3f} | "
            f"{m['false_alarms_per_pair_hour']:.3f} | {m['latency_p50_ms']} | {m['latency_p95_ms']} |")
    lines.append("")
    lines.append(f"Throughput: {result['throughput_updates_per_s']:,.0f} book updates/s through the engine "
                 f"({result['book_updates']:,} updates in {result['engine_seconds']:.2f} s, one core).")
    return "\n".join(lines)
