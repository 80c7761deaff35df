"""What the detector traces (bench/trace_vacuuming.py, bench/trace_flipping.py) share: a
detector's module run from a copy of its source with trace lines written in, swapped into
the engine, and the evaluation's rows of each (seed, pair) explained by what it recorded."""

from __future__ import annotations

import sys
import types
from pathlib import Path


def traced_module(path: Path, name: str, with_traces) -> types.ModuleType:
    """The module `name` compiled from `path` after `with_traces(lines)` wrote its trace lines
    in (they append to the module's `_TRACE`)."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__package__ = name.rpartition(".")[0]
    module._TRACE = []
    source = "\n".join(with_traces(path.read_text().split("\n")))
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 (our own source)
    return module


def install(traced: types.ModuleType, detector_class: str, explain) -> None:
    """Put the traced module's detector class in the engine, and have the evaluation of each
    (seed, pair) pass its detail rows through explain(row, trace)."""
    import schemes.detectors.engine as engine
    import schemes.evaluation as evaluation

    sys.modules[traced.__name__] = traced
    setattr(engine, detector_class, getattr(traced, detector_class))
    evaluate_pair = evaluation._evaluate_pair

    def traced_evaluate_pair(seed, pair, *args, **kwargs):
        traced._TRACE.clear()
        stats, updates, seconds, rows = evaluate_pair(seed, pair, *args, **kwargs)
        return stats, updates, seconds, [explain(row, traced._TRACE) for row in rows]

    # the pool pickles the function by name: it must look like the one it replaces
    traced_evaluate_pair.__module__ = "schemes.evaluation"
    traced_evaluate_pair.__qualname__ = traced_evaluate_pair.__name__ = "_evaluate_pair"
    evaluation._evaluate_pair = traced_evaluate_pair


SUMMARY = ("episodes", "detected", "false_positives", "misclassified", "precision", "recall",
           "false_alarms_per_pair_hour")


def evaluate_traced(argv, description: str, detector: Path, source_env: str, install_from, *, seeds, hours: float,
                    pairs: str, batch_ms: int, market: str) -> dict:
    """Parse a trace's command line (the defaults given), put the traced detector in place here
    and, through source_env, in the pool's workers, and run the evaluation with details."""
    import argparse
    import os

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seeds", type=int, nargs="+", default=seeds)
    ap.add_argument("--hours", type=float, default=hours)
    ap.add_argument("--pairs", default=pairs)
    ap.add_argument("--batch-ms", type=int, default=batch_ms, help="0: depth per event")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--market", default=market, help="the labelled market (schemes.evaluation.MARKETS)")
    ap.add_argument("--source", default=str(detector), help=f"a variant of {detector.name} to trace instead")
    args = ap.parse_args(argv)
    os.environ[source_env] = str(Path(args.source).resolve())
    install_from(Path(args.source))
    from schemes.evaluation import evaluate

    return evaluate(args.seeds, args.pairs.split(","), args.hours, details=True, processes=args.processes,
                    batch_ms=args.batch_ms, market=args.market)


def summary(scheme: str, figures: dict) -> str:
    return f"{scheme} " + str({k: round(figures[k], 3) if isinstance(figures[k], float) else figures[k] for k in SUMMARY})
