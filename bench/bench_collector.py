"""Python's cyclic garbage collector under ingestion's load: N pairs' bar builders and
detectors in one process (as one ingestion process holds them), fed the real Binance
recordings second by second, with Python's default collector thresholds and with the
long-lived processes' settings (config/collector.py). CPU per event and the collections'
share of it, each setting in a fresh process.

    python bench/bench_collector.py            # BENCH_COLLECTOR_PAIRS=50 BENCH_COLLECTOR_SECONDS=120
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RECORDINGS = {"BTCUSDT": ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz",
              "ETHUSDT": ROOT / "data/realdata/binance-spot/ethusdt_20240808.gz"}


def measure(setting: str, pairs: int, seconds: float) -> dict:
    from config.collector import collect_less_often
    from market.sources.bar_builder import BarBuilder
    from market.sources.events import PairRef
    from market.sources.venues import binance_recording_events
    from schemes.detectors import DetectorEngine

    events = {}
    for symbol, path in RECORDINGS.items():
        with gzip.open(path, "rt") as fh:
            events[symbol] = sorted(binance_recording_events(fh.read().splitlines(), symbol), key=lambda e: e.ts_ms)
    if setting == "long-lived":
        collect_less_often()
    held = []
    for i in range(pairs):
        symbol = "BTCUSDT" if i % 2 == 0 else "ETHUSDT"
        ref = PairRef("binance", f"P{i}", "USDT")
        held.append([BarBuilder(ref), DetectorEngine(ref, batch_ms=100), events[symbol], 0])
    collecting = {"cpu": 0.0, "since": 0.0}

    def timed(phase, _info):
        if phase == "start":
            collecting["since"] = time.process_time()
        else:
            collecting["cpu"] += time.process_time() - collecting["since"]

    gc.callbacks.append(timed)
    second = min(e[0].ts_ms for e in events.values())
    end, fed = second + seconds * 1000, 0
    started = time.process_time()
    while second < end:
        second += 1000
        for entry in held:
            builder, engine, stream, at = entry
            upto = at
            while upto < len(stream) and stream[upto].ts_ms < second:
                upto += 1
            chunk, entry[3] = stream[at:upto], upto
            for event in chunk:
                builder.feed(event)
            if chunk:
                engine.feed_many(chunk)
            fed += len(chunk)
    cpu = time.process_time() - started
    gc.callbacks.remove(timed)
    return {"setting": setting, "events": fed, "cpu_s": cpu, "gc_cpu_s": collecting["cpu"],
            "full_collections": gc.get_stats()[2]["collections"]}


def run() -> list[dict]:
    pairs = int(os.environ.get("BENCH_COLLECTOR_PAIRS", 50))
    seconds = float(os.environ.get("BENCH_COLLECTOR_SECONDS", 120))
    results = {}
    for setting in ("default", "long-lived"):
        out = subprocess.run([sys.executable, __file__, "--one", setting, str(pairs), str(seconds)],
                             capture_output=True, text=True, check=True, cwd=ROOT)
        results[setting] = json.loads(out.stdout.strip().splitlines()[-1])
    default, tuned = results["default"], results["long-lived"]

    def per_event(r):
        return r["cpu_s"] / r["events"] * 1e6

    return [{
        "figure": f"{pairs} busy pairs' bars and detectors in one process ({tuned['events']:,} real Binance events, "
                  f"{seconds:.0f} s of each recording): CPU per event with the long-lived processes' collector "
                  "settings (config/collector.py)",
        "value": f"{per_event(tuned):.1f} us (collections {tuned['gc_cpu_s'] / tuned['cpu_s']:.0%} of it, "
                 f"{tuned['full_collections']} full)",
        "comparison": f"Python's default thresholds: {per_event(default):.1f} us (collections "
                      f"{default['gc_cpu_s'] / default['cpu_s']:.0%}, {default['full_collections']} full)",
        "goal": "less CPU than the default",
        "met": per_event(tuned) < per_event(default),
    }]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))))
    else:
        for row in run():
            print(row)
