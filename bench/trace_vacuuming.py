"""Which of the vacuuming detector's tests stopped each missed episode (a diagnostic, not
part of `make bench`).

    python bench/trace_vacuuming.py --seeds 1 2 3 4 5 6 --batch-ms 100
    python bench/trace_vacuuming.py --seeds 1 2 --source /tmp/vacuuming_variant.py   # a variant
    python bench/trace_vacuuming.py --seeds 1 2 --hours 1 --market second_market --pairs binance/BTC/USDT

Runs `schemes.evaluation.evaluate` with details on a copy of schemes/detectors/vacuuming.py
(or of --source) in which every `continue` of the pull's tests records its line. For each
missed clear episode it prints how often each test line stopped a candidate on that side
from 3 s before the episode's end to 5 s after, and the furthest line reached (the test that
finally stopped it); for each detection, the pull's shape when it was accepted (largest
level's share of the cancelled quantity, large orders claimed, layering's shape, cancelled
and cancelled-outside-the-largest-level quantity against the usual depth, levels, peak
against the usual depth). The tests are numbered by their line in the source traced."""

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

SOURCE_ENV = "TRACE_VACUUMING_SOURCE"  # spawned workers read the source to trace from here
DETECTOR = ROOT / "schemes" / "detectors" / "vacuuming.py"


def _with_traces(lines: list) -> list:
    """Each test of a pull reporting the line that stopped it, and the pull's shape when accepted."""
    first_test = next(i for i, line in enumerate(lines) if "peak_ts, peak = max(hist" in line)
    out = []
    for i, line in enumerate(lines):
        indent = line[:len(line) - len(line.lstrip())]
        if i > first_test and re.match(r"^\s+continue\b", line):
            out.append(f"{indent}_TRACE.append((side, ts, {i + 1}))")
        if "self.pending.append(_Pending(side" in line:
            out.append(f"{indent}_TRACE.append((side, ts, 'accepted', round(biggest / canc, 3), len(recs), "
                       "layer_shaped, round(canc / base, 2), round((canc - biggest) / base, 2), len(levels), "
                       "round(peak / base, 2)))")
        out.append(line)
    return out


def _install(path: Path) -> None:
    """Swap the traced detector into the engine and explain the evaluation's rows."""
    install(traced_module(path, "schemes.detectors.vacuuming", _with_traces), "VacuumingDetector", _explained)


def _explained(row: tuple, trace: list) -> tuple:
    if row[3] != "vacuuming":
        return row
    if row[0] == "FN":
        end = row[8]
        stops = [t for t in trace if t[0] == row[4] and end - 3000 <= t[1] <= end + 5000 and t[2] != "accepted"]
        counts = dict(sorted(collections.Counter(t[2] for t in stops).items()))
        shape = {k: row[9].get(k) for k in ("depth_multiplier", "levels", "chunks", "pull_ms", "pull_fraction",
                                            "rest_ms", "kick_sigma")}
        return row[:9] + (f"stopped at lines {counts}, furthest {max(counts, default=None)}", shape)
    if row[0] in ("TP", "FP"):
        accepted = [t for t in trace if t[2] == "accepted" and t[0] == row[4] and row[5] - 6000 <= t[1] <= row[5]]
        return row + (accepted[-1][3:] if accepted else None,)
    return row


if __name__ != "__main__" and os.environ.get(SOURCE_ENV):
    _install(Path(os.environ[SOURCE_ENV]))  # a spawned worker of the pool below


def main(argv=None) -> int:
    result = evaluate_traced(argv, __doc__.splitlines()[0], DETECTOR, SOURCE_ENV, _install, seeds=[1, 2, 3, 4, 5, 6],
                             hours=2.0, pairs="binance/BTC/USDT,binance/ETH/USDT,binance/XRP/USDT,binance/SOL/USDT",
                             batch_ms=100, market="simulator")
    for scheme, m in result["schemes"].items():
        print(summary(scheme, m))
    for row in result["rows"]:
        if row[3] == "vacuuming" and row[0] in ("TP", "FP", "FN"):
            print(*row)
    return 0

if __name__ == "__main__":
    sys.exit(main())
