"""`make bench`: run every benchmark, print and write docs/BENCHMARKS.md.

Each benchmark module exposes run() -> list of rows {figure, value, comparison, goal, met}.
Benchmarks that need Django run in a subprocess each, so their settings do not mix."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
FULL = {"BENCH_DATABASE_URL": PG, "BENCH_REDIS_URL": REDIS}
BENCHES = [
    ("bench_toon", {}),
    ("bench_auth", {"REDIS_URL": ""}),
    ("bench_auth", {"REDIS_URL": REDIS}),
    ("bench_metering", FULL),
    ("bench_ingest", {}),
    ("bench_detectors", {}),
    ("bench_exchange_feed", {}),
    ("bench_collector", {}),  # issue 49: the collector settings of the ingestion worker
    ("bench_replay", {}),
    ("bench_series", {**FULL, "BENCH_CLIENTS": "32"}),  # issue 20: wrk, 32 connections
    ("bench_snapshot", FULL),
    ("bench_bar_storage", FULL),
    ("bench_sse", FULL),
    ("bench_processes", {**FULL, "BENCH_CLIENTS": "32"}),
    ("bench_scale", FULL),  # issue 49: N busy live pairs in the full mode, until lag p99 > 2 s
    ("bench_client", {"DJANGO_SETTINGS_MODULE": "tests.integration.settings"}),  # issue 53: the Python client
    ("bench_mcp", {"DJANGO_SETTINGS_MODULE": "tests.integration.settings"}),  # issue 53: TOON vs JSON per tool
]

RUNNER = """
import json, sys
sys.path.insert(0, {bench!r})
import {module} as m
print("BENCH-ROWS " + json.dumps(m.run(), default=str))
"""


NOTES_HEADING = "## Notes"


def run_one(module: str, env_overrides: dict) -> list[dict]:
    env = {**os.environ, **env_overrides}
    code = RUNNER.format(bench=str(ROOT / "bench"), module=module)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=int(os.environ.get("BENCH_TIMEOUT_SECONDS", 7200)))
    for line in result.stdout.splitlines():
        if line.startswith("BENCH-ROWS "):
            return json.loads(line[len("BENCH-ROWS "):])
    tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
    return [{"figure": module, "value": "failed", "comparison": " / ".join(tail), "goal": "", "met": False}]


def write_document(rows: list[dict], path: Path) -> str:
    """The table of `rows` written to `path`, above the hand-written notes the file holds
    (from NOTES_HEADING on: how and when rows were measured, what was tried), which stay."""
    lines = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores. "
        "Each comparison was measured in the same run as our figure, except the plain "
        "django-eventstream figures quoted beside the SSE rows (measured earlier on this machine).",
        "",
        "| figure | ours | comparison (same run) | goal | met |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        met = {True: "yes", False: "**no**"}.get(row.get("met"), "")
        lines.append(f"| {row['figure']} | {row['value']} | {row['comparison']} | {row['goal']} | {met} |")
    previous = path.read_text() if path.exists() else ""
    notes = previous[previous.find(NOTES_HEADING):] if NOTES_HEADING in previous else ""
    text = "\n".join(lines) + "\n" + ("\n" + notes if notes else "")
    path.write_text(text)
    return text


def dated(rows: list[dict], module: str, env_overrides: dict, when: datetime) -> list[dict]:
    """Each row names the command that measured it and when: one row per figure, its
    history in git."""
    settings = " ".join(f"{name}={value}" for name, value in env_overrides.items() if not name.startswith("BENCH_")
                        or name == "BENCH_CLIENTS")
    command = f"`{settings + ' ' if settings else ''}python bench/{module}.py`"
    return [{**row, "figure": f"{row['figure']}; {command}, {when:%Y-%m-%d %H:%M} UTC"} for row in rows]


def main() -> int:
    rows = []
    for module, env in BENCHES:
        print(f"running {module} {env or ''}", file=sys.stderr)
        rows.extend(dated(run_one(module, env), module, env, datetime.now(timezone.utc)))
    text = write_document(rows, ROOT / "docs" / "BENCHMARKS.md")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
