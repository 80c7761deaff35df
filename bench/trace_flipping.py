"""Where the flipping detector lost each missed episode (a diagnostic, not part of `make bench`).

    python bench/trace_flipping.py --market second_market --seeds 1 2 --hours 1 --batch-ms 0
    python bench/trace_flipping.py --seeds 1 2 3 4 --batch-ms 100
    python bench/trace_flipping.py --seeds 1 2 --source /tmp/flipping_variant.py   # a variant

Runs `schemes.evaluation.evaluate` with details on a copy of schemes/detectors/flipping.py (or
of --source) in which every `return []` of `on_pulled` (a test of the pulled order) records
its line, the opening of a watch records itself, and a watch that ends without an event
records what its flip came to. For each missed clear episode it prints the stage at which
the order at the episode's price (its child orders' side and price, from its first add to
1 s after its end) got furthest:

- "no record": no large order at that price was offered to the detector (the add stayed
  under the engine's large threshold, or was never pulled as one order);
- "stopped at line N": a test of the pull (the line in the source traced);
- "watched": the pull passed every test and the flip fell short: the aggressive taker
  orders counted (in typical taker seconds) against the need, or the mirror seen, and
  whether the watch was closed early (a refresh, the side vacuumed, the mirror withdrawn).

The episode's own flip as its market recorded it is printed beside it (second market:
`flip_trades` / `mirror_ms`, `mirror_qty`), so a reader can compare."""

from __future__ import annotations

import collections
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.detector_trace import evaluate_traced, install, summary, traced_module  # noqa: E402

SOURCE_ENV = "TRACE_FLIPPING_SOURCE"  # spawned workers read the source to trace from here
DETECTOR = ROOT / "schemes" / "detectors" / "flipping.py"


def _with_traces(lines: list) -> list:
    """Each test of a pulled order reporting the line that stopped it, each watch opened
    reporting itself (and the typical taker second it will be measured in)."""
    start = next(i for i, line in enumerate(lines) if "def on_pulled(" in line)
    end = next(i for i in range(start + 1, len(lines)) if re.match(r"^    def ", lines[i]))
    out = []
    for i, line in enumerate(lines):
        indent = line[:len(line) - len(line.lstrip())]
        if start < i < end and line.strip().startswith("return []"):
            out.append(f"{indent}_TRACE.append((rec.side, rec.price, ts, {i + 1}, None))")
        out.append(line)
        if start < i < end and line.strip() == "self.watches.append(watch)":
            out.append(f"{indent}_TRACE.append((rec.side, rec.price, ts, 'watched', (watch, eng.base.med_taker)))")
    return out


def _install(path: Path) -> None:
    """Swap the traced detector into the engine and explain the evaluation's rows."""
    install(traced_module(path, "schemes.detectors.flipping", _with_traces), "FlippingDetector", _explained)


def _watch_outcome(w, med_taker) -> str:
    if w.rec.used:
        return "an event (of another episode's window)"
    unit = med_taker or 1.0
    if w.mirror is not None:
        return (f"mirror {w.mirror.qty / w.rec.qty:.2f} x the order, {w.mirror.cancelled / w.mirror.qty:.0%} "
                f"of it cancelled, {'closed' if w.done else 'not rested'}")
    counted = w.taken + (w.burst_qty if w.burst_qty >= unit else 0.0)
    closed = "closed early (refresh or the side vacuumed)" if w.done else "window ran out"
    return f"taker orders counted {counted / unit:.1f} typical taker seconds, {closed}"


def _explained(row: tuple, trace: list) -> tuple:
    if row[3] != "flipping" or row[0] != "FN":
        return row
    p, start, end = row[9], row[7], row[8]
    children = [o for o in p.get("orders", ()) if o.get("tag") != "mirror"] or list(p.get("orders", ()))
    prices = {o["price"] for o in children}
    side = children[0]["side"] if children else row[4]
    mine = [t for t in trace if t[0] == side and t[1] in prices and start <= t[2] <= end + 1000]
    if not mine:
        stage = "no record"
    elif any(t[3] == "watched" for t in mine):
        w, med_taker = next(t[4] for t in reversed(mine) if t[3] == "watched")
        stage = f"watched: {_watch_outcome(w, med_taker)}"
    else:
        stage = "stopped at lines " + str(dict(sorted(collections.Counter(t[3] for t in mine).items())))
    own = {k: p.get(k) for k in ("mode", "n_children", "size_factor", "flip_trades", "flip_required_lots",
                                 "mirror_ms", "mirror_qty", "large_qty") if k in p}
    return row[:9] + (stage, own)


if __name__ != "__main__" and os.environ.get(SOURCE_ENV):
    _install(Path(os.environ[SOURCE_ENV]))  # a spawned worker of the pool below


def main(argv=None) -> int:
    result = evaluate_traced(argv, __doc__.splitlines()[0], DETECTOR, SOURCE_ENV, _install, seeds=[1, 2], hours=1.0,
                             pairs="binance/BTC/USDT,coinbase/BTC/USD,binance/XRP/USDT,binance/DOGE/USDT",
                             batch_ms=0, market="second_market")
    print(summary("flipping", result["schemes"]["flipping"]))
    stages = collections.Counter()
    for row in result["rows"]:
        if row[3] == "flipping" and row[0] == "FN":
            stages[row[9].split(":")[0].split(" {")[0]] += 1
            print(*row)
    print("missed, by stage:", dict(stages.most_common()))
    return 0

if __name__ == "__main__":
    sys.exit(main())
