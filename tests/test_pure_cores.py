"""The pure computation (DESIGN.md) imports without Django: each core in a fresh
interpreter loads no Django, DRF, Celery or settings package, so it can be tested and
benchmarked alone."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE_CORES = ["toon", "market.sources.events", "market.sources.order_book", "market.sources.bar_builder", "market.sources.simulator",
              "market.sources.netting", "market.sources.flow_stats", "market.sources.second_market", "market.synthesis", "market.series", "market.bar_pack",
              "schemes.detectors"]
FRAMEWORKS = {"django", "rest_framework", "celery", "config"}


@pytest.mark.parametrize("module", PURE_CORES)
def test_a_pure_core_imports_in_a_fresh_interpreter_without_django(module):
    probe = (f"import sys, {module}\n"
             f"print(','.join(sorted({{name.split('.')[0] for name in sys.modules}} & set({sorted(FRAMEWORKS)!r}))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"{module} loads {done.stdout.strip()}"
