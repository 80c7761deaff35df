"""bench/trace_flipping.py: the traced copy of the flipping detector reports where a pulled order stopped."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("trace_flipping", ROOT / "bench" / "trace_flipping.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_test_of_a_pulled_order_and_every_watch_opened_is_traced():
    tool = _tool()
    traced = tool.traced_module(tool.DETECTOR, "schemes.detectors.flipping", tool._with_traces)
    source = tool.DETECTOR.read_text().split("\n")
    start = next(i for i, line in enumerate(source) if "def on_pulled(" in line)
    end = next(i for i in range(start + 1, len(source)) if source[i].startswith("    def "))
    tests = [i + 1 for i in range(start, end) if source[i].strip().startswith("return []")]
    assert len(tests) >= 5

    class _Rec:
        side, price = "bid", 100.0
        dist_scaled = 99.0  # far from the touch: the first distance test stops it

    class _Eng:
        class tracker:
            scale = 1.0

    assert traced.FlippingDetector().on_pulled(_Eng, _Rec, 1234) == []
    assert traced._TRACE == [("bid", 100.0, 1234, tests[0], None)], "stopped at the distance test, its line named"
