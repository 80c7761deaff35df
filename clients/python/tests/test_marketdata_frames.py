"""Series and snapshots as DataFrames: typed columns, UTC millisecond times, nulls kept,
and the documented columns for an empty range."""

import pytest

from marketdata import Series, Snapshot

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

META = {"source_type": "exchange", "source": "binance", "symbol": "BTC-USDT", "metric_type": "trades",
        "sides": ["buy", "sell"], "resolution": "hourly", "start": "2026-10-01", "end": "2026-10-01", "count": 2}
ROWS = [{"date": "2026-10-01T00:00:00Z", "volume": 1.5, "buy_volume": 1, "sell_volume": 0.5, "trade_count": 9,
         "vwap": 100.25},
        {"date": "2026-10-01T01:00:00Z", "volume": 2.0, "buy_volume": 1.0, "sell_volume": 1.0, "trade_count": 4,
         "vwap": 101.0}]


def test_a_series_frame_has_typed_columns_and_utc_millisecond_dates():
    series = Series.from_wire({"meta": META, "data": ROWS})
    frame = series.to_pandas()
    assert str(frame["date"].dtype) == "datetime64[ms, UTC]"
    assert frame["date"].tolist() == [pd.Timestamp("2026-10-01T00:00Z"), pd.Timestamp("2026-10-01T01:00Z")]
    assert str(frame["buy_volume"].dtype) == "float64" and str(frame["trade_count"].dtype) == "Int64"
    assert frame["vwap"].tolist() == [100.25, 101.0]

    polars = series.to_polars()
    assert polars.schema["date"] == pl.Datetime("ms", "UTC")
    assert polars.schema["buy_volume"] == pl.Float64 and polars.schema["trade_count"] == pl.Int64
    assert polars["trade_count"].to_list() == [9, 4]


def test_an_empty_series_has_the_documented_columns():
    series = Series.from_wire({"meta": {**META, "count": 0}, "data": []})
    assert series.to_pandas().columns.tolist() == ["date", "volume", "buy_volume", "sell_volume", "trade_count",
                                                   "vwap"]
    assert series.to_polars().schema["date"] == pl.Datetime("ms", "UTC")


def test_a_snapshot_frame_turns_ts_ms_into_ts_and_keeps_nulls():
    snapshot = Snapshot.from_wire({
        "exchange": "binance", "base": "BTC", "quote": "USDT", "granularity": "second", "from_ms": 0, "to_ms": 2000,
        "metrics": ["trade", "quote"], "count": 2,
        "bars": [{"ts_ms": 1000, "open": 1, "trade_count": 2, "bid_price": 3},
                 {"ts_ms": 2000, "open": None, "trade_count": None, "bid_price": 4}]})
    frame = snapshot.to_pandas()
    assert frame.columns.tolist() == ["ts", "open", "trade_count", "bid_price"]
    assert str(frame["ts"].dtype) == "datetime64[ms, UTC]" and frame["ts"][1] == pd.Timestamp(2000, unit="ms", tz="UTC")
    assert frame["trade_count"].isna().tolist() == [False, True]
    polars = snapshot.to_polars()
    assert polars.schema["ts"] == pl.Datetime("ms", "UTC") and polars["open"].to_list() == [1.0, None]
    empty = Snapshot.from_wire({**snapshot.__dict__, "count": 0, "bars": []}).to_polars()
    assert empty.columns[:2] == ["ts", "open"] and "bid_price" in empty.columns and "bid_depth" not in empty.columns
