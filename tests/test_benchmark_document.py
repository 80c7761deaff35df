"""`make bench` rewrites docs/BENCHMARKS.md's table and keeps its hand-written notes."""

from datetime import datetime, timezone

from bench.run_all import NOTES_HEADING, dated, write_document

ROW = {"figure": "bare Django", "value": "900 req/s", "comparison": "100 %", "goal": "reference", "met": None}


def test_a_new_run_replaces_the_table_and_keeps_the_notes(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n| figure |\n|---|\n| old row |\n\n"
                    f"{NOTES_HEADING}\n\nMeasured on a slow day; the switch interval changed nothing.\n")
    text = write_document([ROW, {**ROW, "figure": "counted candlestick", "met": False}], path)
    assert path.read_text() == text
    assert "old row" not in text
    assert "| bare Django | 900 req/s | 100 % | reference |  |" in text
    assert "| counted candlestick | 900 req/s | 100 % | reference | **no** |" in text
    assert text.index("counted candlestick") < text.index(NOTES_HEADING)
    assert text.endswith(f"{NOTES_HEADING}\n\nMeasured on a slow day; the switch interval changed nothing.\n")


def test_a_first_run_writes_the_table_alone(tmp_path):
    text = write_document([ROW], tmp_path / "BENCHMARKS.md")
    assert NOTES_HEADING not in text and text.endswith("| bare Django | 900 req/s | 100 % | reference |  |\n")


def test_each_row_names_its_command_and_when_it_ran():
    when = datetime(2026, 11, 28, 3, 20, tzinfo=timezone.utc)
    (row,) = dated([ROW], "bench_series", {"BENCH_DATABASE_URL": "postgres://x", "BENCH_CLIENTS": "32",
                                           "REDIS_URL": ""}, when)
    assert row["figure"] == "bare Django; `BENCH_CLIENTS=32 REDIS_URL= python bench/bench_series.py`, 2026-11-28 03:20 UTC"
