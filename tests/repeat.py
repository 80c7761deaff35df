"""Run a part of the suite many times in a row and say how often it failed: the proof that
a test that once flaked no longer does.

    .venv/bin/python tests/repeat.py --runs 20 tests/integration
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python tests/repeat.py --runs 20 tests/integration

Each run is a fresh pytest process (as CI starts one), with the environment as given: with
DATABASE_URL and REDIS_URL set it is the full mode, without them the embedded one. Every
run goes on after a failure unless --stop-on-failure; the failed tests and the run's last
lines go to the summary. Exit status 0 only when every run passed."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["tests/integration"])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--stop-on-failure", action="store_true")
    parser.add_argument("--log-dir", type=Path, default=ROOT / "var" / "repeat")
    args = parser.parse_args(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    failures: dict[str, int] = {}
    failed_runs = 0
    for run in range(1, args.runs + 1):
        started = time.monotonic()
        log = args.log_dir / f"run-{run:02d}.log"
        with log.open("w") as out:
            code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.paths],
                                   cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        text = log.read_text()
        failed = FAILED.findall(text)
        for test in failed:
            failures[test] = failures.get(test, 0) + 1
        verdict = "passed" if code == 0 else f"FAILED (exit {code}): {', '.join(failed) or 'see ' + str(log)}"
        print(f"run {run:2d}/{args.runs}: {verdict} in {time.monotonic() - started:.0f} s", flush=True)
        if code != 0:
            failed_runs += 1
            if args.stop_on_failure:
                break
    print(f"{run - failed_runs} of {run} runs passed; logs in {args.log_dir}")
    for test, times in sorted(failures.items(), key=lambda item: -item[1]):
        print(f"  {times:2d} x {test}")
    return 0 if failed_runs == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
