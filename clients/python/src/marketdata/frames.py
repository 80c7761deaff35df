"""Rows as pandas or polars DataFrames with typed columns: times as UTC milliseconds
(`date` of a series, `ts_ms` of a bar, which becomes `ts`), documented floats as float64,
counts as 64-bit integers (nullable in pandas: a bar's missing metric is null), the rest
as strings. The column set is the documented one, so an empty range still has its schema.
pandas and polars are optional extras, imported only here."""

from __future__ import annotations

from calendar import timegm
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from .models import FLOAT_FIELDS, INTEGER_FIELDS

TIME_COLUMNS = {"date": "date", "ts_ms": "ts"}  # wire name -> frame name


def day_or_hour_ms(value: str | None) -> int | None:
    """Epoch ms of `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SSZ` (both UTC)."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return timegm(parsed.utctimetuple()) * 1000


def columns_of(rows: Sequence[Mapping[str, Any]], documented: Sequence[str]) -> dict[str, list[Any]]:
    """Column lists in the served order: the rows' own columns when there are rows (a
    `side` serves fewer), the documented ones for an empty range."""
    names = list(rows[0].keys()) if rows else list(documented)
    for row in rows[1:]:
        names.extend(name for name in row if name not in names)
    columns: dict[str, list[Any]] = {}
    for name in names:
        values = [row.get(name) for row in rows]
        if name == "date":
            values = [day_or_hour_ms(v) for v in values]
        columns[name] = values
    return columns


def _kind(name: str) -> str:
    if name in TIME_COLUMNS:
        return "time"
    if name in FLOAT_FIELDS:
        return "float"
    if name in INTEGER_FIELDS:
        return "int"
    return "other"


def rows_to_pandas(rows: Sequence[Mapping[str, Any]], documented: Iterable[str]) -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("to_pandas needs pandas: pip install 'marketdata-client[pandas]'") from exc
    data = {}
    for name, values in columns_of(rows, tuple(documented)).items():
        kind = _kind(name)
        if kind == "time":
            data[TIME_COLUMNS[name]] = pd.to_datetime(pd.Series(values, dtype="Int64"), unit="ms", utc=True)\
                .astype("datetime64[ms, UTC]")
        elif kind == "float":
            data[name] = pd.Series(values, dtype="float64")
        elif kind == "int":
            data[name] = pd.Series(values, dtype="Int64")
        else:
            data[name] = pd.Series(values, dtype="object")
    return pd.DataFrame(data)


def rows_to_polars(rows: Sequence[Mapping[str, Any]], documented: Iterable[str]) -> Any:
    try:
        import polars as pl
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("to_polars needs polars: pip install 'marketdata-client[polars]'") from exc
    series = []
    for name, values in columns_of(rows, tuple(documented)).items():
        kind = _kind(name)
        if kind == "time":
            series.append(pl.Series(TIME_COLUMNS[name], values, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC")))
        elif kind == "float":
            series.append(pl.Series(name, values, dtype=pl.Float64))
        elif kind == "int":
            series.append(pl.Series(name, values, dtype=pl.Int64))
        else:
            series.append(pl.Series(name, values))
    return pl.DataFrame(series)
