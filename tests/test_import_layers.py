"""Dependencies between the apps run one way (DESIGN.md): the import-linter contracts in
pyproject.toml ([tool.importlinter]) hold, function-local imports included. A broken one
prints the chain of imports that breaks it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
