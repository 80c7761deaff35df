"""The detectors give the same output in any process and with any hash seed, uninterrupted
or resumed from a checkpoint taken in another process: run on the real recorded BTCUSDT
traffic in subprocesses with different PYTHONHASHSEED values."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, pickle, sys
sys.path.insert(0, {root!r})
from market.sources.events import PairRef
from market.sources.venues import binance_recording_events
from schemes.detectors import DetectorEngine

pair = PairRef("binance", "BTC", "USDT")
events = sorted(binance_recording_events({recording!r}, "BTCUSDT"), key=lambda e: e.ts_ms)
mode, cut = sys.argv[1], len(events) // 2
if mode == "whole":
    found = DetectorEngine(pair).feed_many(events)
elif mode == "first-half":
    engine = DetectorEngine(pair)
    found = engine.feed_many(events[:cut])
    sys.stdout.buffer.write(pickle.dumps((engine.state(), [f.to_dict() for f in found])))
    raise SystemExit
else:  # second-half: restore what another process saved
    state, before = pickle.loads(sys.stdin.buffer.read())
    found = before + [f.to_dict() for f in DetectorEngine.restore(state).feed_many(events[cut:])]
    print(json.dumps(found, sort_keys=True, default=str))
    raise SystemExit
print(json.dumps([f.to_dict() for f in found], sort_keys=True, default=str))
"""


def run(mode: str, seed: int, stdin: bytes | None = None) -> bytes:
    code = SCRIPT.format(root=str(ROOT), recording=str(ROOT / "data/realdata/binance-spot/btcusdt_20240808.gz"))
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run([sys.executable, "-c", code, mode], input=stdin, capture_output=True, env=env,
                          timeout=300, check=True)
    return done.stdout


def test_the_same_recording_gives_the_same_detections_with_any_hash_seed():
    outputs = {seed: run("whole", seed) for seed in (0, 1, 2)}
    assert len(set(outputs.values())) == 1, {seed: len(json.loads(out)) for seed, out in outputs.items()}


def test_a_checkpoint_restored_in_another_process_finds_what_an_uninterrupted_run_finds():
    uninterrupted = run("whole", 5)
    resumed = run("second-half", 7, stdin=run("first-half", 6))  # saved and restored under other hash seeds
    assert json.loads(resumed) == json.loads(uninterrupted)
