"""Conformance and behaviour tests for the TOON encoder (``toon``).

Every case of every official encode fixture file (``tests/fixtures/toon-spec/encode``,
vendored with their license and source in that folder's README) must match byte for byte, through ``encode``,
``encode_lines`` and ``iter_encode``, on both number paths: the orjson
accelerated one and the pure-Python one.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # also importable without pytest-django / python -m
    sys.path.insert(0, str(ROOT))

from bench.bench_toon import build_response  # noqa: E402  (the benchmark's candlestick day)
from toon import encoder as toon  # noqa: E402

SPEC_DIR = ROOT / "tests" / "fixtures" / "toon-spec"
ENCODE_DIR = SPEC_DIR / "encode"


def _fixture_cases() -> list:
    cases = []
    for path in sorted(ENCODE_DIR.glob("*.json")):
        suite = json.loads(path.read_text(encoding="utf-8"))
        for index, case in enumerate(suite["tests"]):
            cases.append(pytest.param(case, id=f"{path.stem}[{index}] {case['name']}"))
    assert cases, f"no TOON fixtures under {ENCODE_DIR}"
    return cases


def _options(case: dict) -> dict:
    options = case.get("options") or {}
    unknown = set(options) - {"delimiter", "indentSize"}
    assert not unknown, f"fixture uses encoder options this test does not map: {unknown}"
    kwargs = {}
    if "delimiter" in options:
        kwargs["delimiter"] = options["delimiter"]
    if "indentSize" in options:
        kwargs["indent"] = options["indentSize"]
    return kwargs


@pytest.fixture(params=["orjson", "pure"])
def number_path(request, monkeypatch):
    """Run a test on the orjson-accelerated path and on the pure-Python path."""
    if request.param == "pure":
        monkeypatch.setattr(toon, "_orjson", None)
    elif toon._orjson is None:
        pytest.skip("orjson is not installed")
    return request.param


@pytest.mark.parametrize("case", _fixture_cases())
def test_spec_fixture(case, number_path):
    kwargs = _options(case)
    if case.get("shouldError"):
        with pytest.raises((ValueError, TypeError)):
            toon.encode(case["input"], **kwargs)
        return
    expected = case["expected"]
    assert toon.encode(case["input"], **kwargs) == expected
    assert "\n".join(toon.encode_lines(case["input"], **kwargs)) == expected
    assert "".join(toon.iter_encode(case["input"], lines_per_chunk=2, **kwargs)) == expected


def test_fixture_suite_is_complete():
    if not ENCODE_DIR.is_dir():
        pytest.skip(f"TOON spec fixtures not found at {ENCODE_DIR}")
    files = sorted(ENCODE_DIR.glob("*.json"))
    assert files, "no encode fixture files"
    total = sum(len(json.loads(p.read_text(encoding="utf-8"))["tests"]) for p in files)
    assert total == len(_fixture_cases())


# ---------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (42, "42"),
        (-7, "-7"),
        (10**30, "1000000000000000000000000000000"),
        (5.0, "5"),
        (-5.0, "-5"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (43123.57, "43123.57"),
        (1 / 3, "0.3333333333333333"),
        (1e6, "1000000"),
        (1e-4, "0.0001"),
        (1.5e-5, "0.000015"),
        (1e-6, "0.000001"),
        (1e-7, "0.0000001"),
        (-2.5e-10, "-0.00000000025"),
        (1e15, "1000000000000000"),
        (1e16, "10000000000000000"),
        (1e20, "100000000000000000000"),
        (1e21, "1000000000000000000000"),
        (2.0**60, "1152921504606846976"),  # exact digits of an integral float
        (9007199254740991.0, "9007199254740991"),
    ],
)
def test_number_canonical_form(value, expected, number_path):
    assert toon.encode(value) == expected
    assert toon.encode([value, value]) == f"[2]: {expected},{expected}"
    assert toon.encode([{"v": value}, {"v": value}]) == f"[2]{{v}}:\n  {expected}\n  {expected}"


def test_number_canonical_form_has_no_exponent_and_round_trips(number_path):
    rng = random.Random(7)
    values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(2000)]
    values += [5e-324, 1.7976931348623157e308, 2.0**-1074 * 3, 1e300]
    cells = toon.encode(values).split(": ", 1)[1].split(",")
    assert len(cells) == len(values)
    for value, cell in zip(values, cells):
        assert "e" not in cell and "E" not in cell, cell
        assert not cell.startswith("-0") or cell.startswith("-0.")
        if "." in cell:
            assert not cell.endswith("0"), cell  # no trailing zeros
        assert float(cell) == value if "." in cell else int(cell) == value


def test_nan_and_infinity_encode_as_null(number_path):
    nan, inf = float("nan"), float("inf")
    assert toon.encode(nan) == "null"
    assert toon.encode(inf) == "null"
    assert toon.encode(-inf) == "null"
    assert toon.encode({"a": nan}) == "a: null"
    assert toon.encode([1.5, nan, inf, -inf]) == "[4]: 1.5,null,null,null"
    rows = [{"x": 1.5, "y": nan}, {"x": inf, "y": 2.25}]
    assert toon.encode({"rows": rows}) == "rows[2]{x,y}:\n  1.5,null\n  null,2.25"


def test_negative_zero_encodes_as_zero(number_path):
    assert toon.encode(-0.0) == "0"
    assert toon.encode({"a": -0.0}) == "a: 0"
    assert toon.encode([-0.0, 0.0, -0.0]) == "[3]: 0,0,0"
    rows = [{"x": -0.0, "y": 1.5}, {"x": 2.5, "y": -0.0}]
    assert toon.encode(rows) == "[2]{x,y}:\n  0,1.5\n  2.5,0"


@pytest.mark.parametrize("delimiter", [",", "|", "\t"])
@pytest.mark.parametrize("integral_every", [1, 3, 50, 1000])
@pytest.mark.parametrize(
    "fields",
    [
        ("t", "price", "n", "odd"),  # quoted strings and numbers: one-shot table path
        ("sym", "price", "n", "odd"),  # bare strings and numbers: one-shot table path
        ("t", "sym", "price", "n", "odd"),  # mixed quoting: column-wise path
        ("odd",),
    ],
)
def test_tables_of_numbers_and_strings(fields, integral_every, delimiter, number_path):
    """Table rows with integral floats sparse or dense, floats needing care,
    bare and quoted string columns, against a cell-by-cell rendering."""
    rng = random.Random(integral_every)
    rows = []
    for i in range(400):
        price = float(rng.randint(1, 9999)) if i % integral_every == 0 else round(rng.uniform(1, 1e4), 2)
        row = {
            "t": f"2024-03-01T00:{i // 60:02d}:{i % 60:02d}Z",
            "sym": rng.choice(["BTC", "ETH", "SOL"]),
            "price": price,
            "n": rng.randint(-5, 5),
            "odd": rng.choice([1e-9, -0.0, float("nan"), 2.5, None, 3.0, 1e22, 0.1]),
        }
        rows.append({key: row[key] for key in fields})
    known = {1e-9: "0.000000001", 2.5: "2.5", 3.0: "3", 1e22: "10000000000000000000000", 0.1: "0.1"}

    def cell(key, value):
        if key == "t":
            return f'"{value}"'
        if value is None or value != value:
            return "null"
        if key == "odd":
            return "0" if value == 0 else known[value]
        if isinstance(value, float):
            return str(int(value)) if value.is_integer() else repr(value)
        return str(value)

    sym = {"|": "|", "\t": "\t"}.get(delimiter, "")
    expected = [f"[400{sym}]{{{delimiter.join(fields)}}}:"]
    expected += ["  " + delimiter.join(cell(key, row[key]) for key in fields) for row in rows]
    assert toon.encode(rows, delimiter=delimiter) == "\n".join(expected)
    assert toon.encode({"k": rows}, delimiter=delimiter).split("\n")[1:] == expected[1:]


def test_number_paths_agree_on_random_floats(monkeypatch):
    if toon._orjson is None:
        pytest.skip("orjson is not installed")
    rng = random.Random(11)
    values = [rng.uniform(-1e6, 1e6) for _ in range(5000)]
    values += [round(rng.uniform(0, 1e5), rng.randint(0, 8)) for _ in range(5000)]
    values += [rng.random() * 10.0 ** rng.randint(-25, 25) for _ in range(5000)]
    values += [0.0, -0.0, float("nan"), float("inf"), 1e16, 2.0**70, 1e-7]
    rows = [{"v": v, "n": i} for i, v in enumerate(values)]
    accelerated = (toon.encode(values), toon.encode(rows))
    monkeypatch.setattr(toon, "_orjson", None)
    assert (toon.encode(values), toon.encode(rows)) == accelerated


# ---------------------------------------------------------------------------
# Strings, containers, errors
# ---------------------------------------------------------------------------


def test_string_columns_quote_exactly_the_cells_that_need_it(number_path):
    rows = [{"s": s} for s in ["plain", "2024-03-01T00:00:00Z", "", " pad", "42", "true", "a,b", "#x", "-x", "é"]]
    assert toon.encode({"t": rows}) == (
        "t[10]{s}:\n"
        '  plain\n  "2024-03-01T00:00:00Z"\n  ""\n  " pad"\n  "42"\n  "true"\n'
        '  "a,b"\n  "#x"\n  "-x"\n  é'
    )
    timestamps = [{"date": f"2024-03-01T00:00:0{i}Z", "v": i} for i in range(3)]
    assert toon.encode(timestamps, delimiter="|") == (
        '[3|]{date|v}:\n  "2024-03-01T00:00:00Z"|0\n  "2024-03-01T00:00:01Z"|1\n  "2024-03-01T00:00:02Z"|2'
    )


def test_tuples_encode_as_arrays():
    assert toon.encode({"a": (1, 2, 3)}) == toon.encode({"a": [1, 2, 3]}) == "a[3]: 1,2,3"
    assert toon.encode(({"x": 1}, {"x": 2})) == "[2]{x}:\n  1\n  2"


def test_unsupported_values_raise():
    with pytest.raises(TypeError):
        toon.encode({"a": object()})
    with pytest.raises(TypeError):
        toon.encode({"a": {1, 2}})
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError):
        toon.encode(cycle)
    with pytest.raises(ValueError):
        toon.encode({"a": "\ud800"})
    with pytest.raises(ValueError):
        toon.encode({1: "a", "1": "b"})
    with pytest.raises(ValueError):
        toon.encode({}, delimiter=";")
    with pytest.raises(ValueError):
        toon.encode({}, indent=0)


# ---------------------------------------------------------------------------
# Candlestick response: round trip and streaming
# ---------------------------------------------------------------------------


def _candlestick_response(rows: int = 600) -> dict:
    """The benchmark's candlestick day (bench/bench_toon.py), with number edge cases."""
    doc = build_response(rows, seed=3)
    doc["meta"].update(start="2024-03-01", end="2024-03-02")  # dates TOON leaves unquoted
    data = doc["data"]
    data[1]["close"] = 43000.0  # an integral float
    data[2]["price_variance"] = 0.0000042  # repr uses an exponent
    data[3]["price_variance"] = -0.0
    return doc


def _json_model(value):
    """``value`` as it compares after a JSON-model round trip (-0.0 is 0)."""
    if isinstance(value, float) and value == 0:
        return 0
    if isinstance(value, dict):
        return {key: _json_model(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_model(item) for item in value]
    return value


def test_candlestick_response_round_trips_through_toon_format(number_path):
    toon_format = pytest.importorskip("toon_format")
    doc = _candlestick_response()
    text = toon.encode(doc)
    lines = text.split("\n")
    assert lines[:11] == [
        "meta:",
        "  source_type: exchange",
        "  source: binance",
        "  symbol: BTC-USDT",
        "  metric_type: candlestick",
        "  sides[1]: ohlc",
        "  resolution: 1s",
        "  start: 2024-03-01",
        "  end: 2024-03-02",
        "  count: 600",
        "data[600]{date,open,high,low,close,observation_count,price_sum,price_variance}:",
    ]
    assert lines[12].split(",")[4] == "43000"
    assert lines[13].split(",")[7] == "0.0000042"
    assert lines[14].split(",")[7] == "0"
    decoded = toon_format.decode(text)
    assert decoded == _json_model(doc)
    assert list(decoded) == list(doc)  # same key order too
    assert list(decoded["meta"]) == list(doc["meta"])
    assert [list(row) for row in decoded["data"]] == [list(row) for row in doc["data"]]
    assert toon_format.encode(doc) == text  # identical to the official encoder here


def test_streamed_lines_equal_encode(number_path):
    doc = _candlestick_response(1000)
    text = toon.encode(doc)
    streamed = list(toon.encode_lines(doc))
    assert all("\n" not in line for line in streamed)
    assert "\n".join(streamed) == text
    assert len(streamed) == 11 + 1000
    for size in (1, 7, 4096):
        chunks = list(toon.iter_encode(doc, lines_per_chunk=size))
        assert "".join(chunks) == text
    assert len(list(toon.iter_encode(doc, lines_per_chunk=100))) == math.ceil(1011 / 100)
