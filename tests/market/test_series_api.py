"""POST /api/v1/market/* and GET /api/v1/rank/top."""

from datetime import datetime, timezone

import orjson
import pytest

from market.bars import DAY_MS, HOUR_MS
from market.services import bars_write, catalog_seed_demo

from .test_bar_store import trade_bar

JAN1 = int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)


@pytest.fixture
def btc(db):
    pairs = catalog_seed_demo()
    pair = next(p for p in pairs if p.path == "binance/BTC/USDT")
    hours = []
    for day in range(40):
        for hour in range(24):
            ts = JAN1 + day * DAY_MS + hour * HOUR_MS
            bar = trade_bar(ts, [42000.0 + day + hour / 100, 42010.0 + day])
            bar.quote_count, bar.bid_price, bar.ask_price = 1, 42000.0 + day, 42001.0 + day
            bar.spread_bps_sum = bar.spread_bps_min = bar.spread_bps_max = 0.24
            hours.append(bar)
    bars_write(pair=pair, granularity="hour", bars=hours)
    return pair


def post(api, path, body, **extra):
    return api.post(f"/api/v1/market/{path}", body, format="json", **extra)


def test_a_31_day_range_gives_31_daily_candles(api, btc):
    response = post(api, "candlestick", {"exchange": "binance", "symbol": "BTC-USDT",
                                          "start": "2024-01-01", "end": "2024-01-31"})
    assert response.status_code == 200
    body = response.json()
    assert body["meta"] == {"source_type": "exchange", "source": "binance", "symbol": "BTC-USDT",
                            "metric_type": "candlestick", "sides": ["ohlc"], "resolution": "daily",
                            "start": "2024-01-01", "end": "2024-01-31", "count": 31}
    assert len(body["data"]) == 31
    first = body["data"][0]
    assert list(first) == ["date", "open", "high", "low", "close", "observation_count", "price_sum",
                           "price_variance"]
    assert first["date"] == "2024-01-01" and first["observation_count"] == 48
    assert first["open"] == 42000.0 and first["close"] == 42010.0


def test_candlestick_in_toon_decodes_to_the_json(api, btc):
    import toon_format

    body = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-31"}
    as_json = post(api, "candlestick", body).json()
    toon = post(api, "candlestick", {**body, "format": "toon"})
    assert toon["Content-Type"].startswith("application/toon")
    text = toon.content.decode()
    assert "sides[1]: ohlc" in text and "data[31]{date,open,high,low,close,observation_count,price_sum,price_variance}:" in text
    assert toon_format.decode(text) == as_json


def test_hourly_resolution(api, btc):
    body = post(api, "candlestick", {"exchange": "BINANCE", "symbol": "btc-usdt", "start": "2024-01-02",
                                      "end": "2024-01-02", "resolution": "hourly"}).json()
    assert body["meta"]["count"] == 24 and body["meta"]["symbol"] == "BTC-USDT"
    assert body["data"][0]["date"] == "2024-01-02T00:00:00Z"


def test_limit_orders_both_sides_and_one_side(api, btc):
    base = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-03"}
    both = post(api, "limit-orders", base)
    one = post(api, "limit-orders", {**base, "side": "bid_amount"})
    assert both.json()["meta"]["sides"] == ["bid", "ask"] and both.json()["meta"]["metric_type"] == "limit_orders"
    assert list(both.json()["data"][0]) == ["date", "bid_amount", "ask_amount", "bid_notional", "ask_notional",
                                            "bid_orders", "ask_orders"]
    assert list(one.json()["data"][0]) == ["date", "bid_amount", "bid_notional", "bid_orders"]
    assert one.json()["meta"]["sides"] == ["bid"]
    assert one.json()["data"][0]["bid_amount"] == 10.0
    import json

    def data_bytes(response):
        return len(json.dumps(response.json()["data"], separators=(",", ":")))

    assert data_bytes(one) < 0.6 * data_bytes(both)


def test_limit_orders_end_is_optional(api, btc, monkeypatch):
    from config import clock

    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2024, 1, 10, 12, tzinfo=timezone.utc))
    body = post(api, "limit-orders", {"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-05"}).json()
    assert body["meta"]["end"] == "2024-01-10" and body["meta"]["count"] == 6


def test_trades_and_spread_series(api, btc):
    base = {"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-01"}
    trades = post(api, "trades", base).json()
    assert trades["meta"]["metric_type"] == "trades"
    row = trades["data"][0]
    assert row["trade_count"] == 48 and row["volume"] == 48 and row["vwap"] > 42000
    spread = post(api, "spread", base).json()["data"][0]
    assert spread["bid_price"] == 42000.0 and spread["spread_bps_avg"] == pytest.approx(0.24)


def test_days_without_data_are_left_out(api, btc):
    body = post(api, "candlestick", {"exchange": "binance", "symbol": "BTC-USDT",
                                      "start": "2024-02-05", "end": "2024-02-20"}).json()
    assert body["meta"]["count"] == len(body["data"]) == 5


@pytest.mark.parametrize("body, parameter", [
    ({"symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-02"}, "exchange"),
    ({"exchange": "binance", "start": "2024-01-01", "end": "2024-01-02"}, "symbol"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "end": "2024-01-02"}, "start"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01"}, "end"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-13-01", "end": "2024-01-02"}, "start"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": "01/01/2024", "end": "2024-01-02"}, "start"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": 20240101, "end": "2024-01-02"}, "start"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-05", "end": "2024-01-02"}, "end"),
    ({"exchange": "binance", "symbol": "BTCUSDT", "start": "2024-01-01", "end": "2024-01-02"}, "symbol"),
    ({"exchange": "binance", "symbol": "FOO-BAR", "start": "2024-01-01", "end": "2024-01-02"}, "symbol"),
    ({"exchange": "nasdaq", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-02"}, "exchange"),
    ({"exchange": ["binance"], "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-02"}, "exchange"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-12-31",
      "resolution": "hourly"}, "end"),
    ({"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01", "end": "2024-01-02",
      "resolution": "weekly"}, "resolution"),
])
def test_bad_candlestick_bodies_are_400_naming_the_parameter(api, btc, body, parameter):
    response = post(api, "candlestick", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_parameter" and error["details"]["parameter"] == parameter


def test_bad_side_is_400(api, btc):
    response = post(api, "limit-orders", {"exchange": "binance", "symbol": "BTC-USDT", "start": "2024-01-01",
                                           "side": "middle"})
    assert response.status_code == 400 and response.json()["error"]["details"]["parameter"] == "side"


def test_series_are_counted(api, btc):
    response = post(api, "candlestick", {"exchange": "binance", "symbol": "BTC-USDT",
                                          "start": "2024-01-01", "end": "2024-01-02"})
    assert response["X-Quota-Requests-Used"] == "1"
    assert response["X-Quota-Bytes-Used"] == str(len(response.content))


def test_rank_top_lists_ranked_tokens_with_pairs_on_the_exchange(api, btc):
    body = api.get("/api/v1/rank/top?exchange=binance&n=3").json()
    assert body["exchange"] == "binance" and body["as_of"]
    assert [t["symbol"] for t in body["tokens"]] == ["BTC", "ETH", "XRP"] or body["tokens"][0]["symbol"] == "BTC"
    assert body["tokens"][0]["rank"] == 1 and body["tokens"][0]["pairs"] == ["BTC-USDT"]
    assert len(body["tokens"]) == 3
    ranks = [t["rank"] for t in body["tokens"]]
    assert ranks == sorted(ranks)


@pytest.mark.parametrize("query, parameter", [("", "exchange"), ("exchange=nyse", "exchange"),
                                               ("exchange=binance&n=0", "n"), ("exchange=binance&n=251", "n"),
                                               ("exchange=binance&n=ten", "n")])
def test_rank_top_bad_queries_are_400(api, btc, query, parameter):
    response = api.get(f"/api/v1/rank/top?{query}")
    assert response.status_code == 400 and response.json()["error"]["details"]["parameter"] == parameter


def test_rank_top_needs_streaming(make_account, client_for, btc):
    from accounts.services import api_key_create
    from billing.services import plan_upsert

    account = make_account()
    account.plan = plan_upsert(name="data", features=["api"], monthly_requests=100, monthly_bytes=10**6)
    account.save()
    client = client_for(api_key_create(account=account, name="k").plaintext)
    assert client.get("/api/v1/rank/top?exchange=binance").status_code == 403


# The series rows as Bar's derived figures define them (market/bars.py), rounded as
# market/precision.py serves a row: what the rows computed from the stored columns must equal.
def _reference_row(bar, metric, keep=None):
    if metric == "candlestick":
        values = bar.trade_count and {
            "open": bar.open, "high": bar.high, "low": bar.low, "close": bar.close,
            "observation_count": bar.trade_count, "price_sum": bar.price_sum, "price_variance": bar.price_variance}
    elif metric == "limit_orders":
        n = bar.book_samples
        values = n and {"bid_amount": bar.bid_amount_sum / n, "ask_amount": bar.ask_amount_sum / n,
                        "bid_notional": bar.bid_notional_sum / n, "ask_notional": bar.ask_notional_sum / n,
                        "bid_orders": bar.bid_orders_sum / n, "ask_orders": bar.ask_orders_sum / n}
    elif metric == "trades":
        values = bar.trade_count and {"volume": bar.volume, "buy_volume": bar.buy_volume,
                                      "sell_volume": bar.sell_volume, "trade_count": bar.trade_count,
                                      "vwap": bar.vwap}
    else:
        values = bar.quote_count and {
            "bid_price": bar.bid_price, "ask_price": bar.ask_price, "mid_price": bar.mid_price,
            "spread_bps": bar.spread_bps, "spread_bps_avg": bar.spread_bps_sum / bar.quote_count,
            "spread_bps_min": bar.spread_bps_min, "spread_bps_max": bar.spread_bps_max}
    if not values:
        return None
    return {k: values[k] for k in keep} if keep else values


def _random_bars(rng, count, start_ms, step_ms):
    """Bars with every kind of gap: no trade, no book, no quote, one side missing, zeros."""
    from market.bars import BAR_FIELDS, Bar

    bars = []
    for i in range(count):
        values = {name: (rng.randint(0, 3) if name.endswith(("count", "samples"))
                         else rng.randint(0, 500) if name.endswith("orders_sum")
                         else rng.choice([0.0, rng.uniform(1e-6, 1e5), rng.uniform(1, 100) / 3]))
                  for name in BAR_FIELDS if name != "ts_ms"}
        for name in ("open", "high", "low", "close", "bid_price", "ask_price", "spread_bps_min", "spread_bps_max"):
            if rng.random() < 0.15:
                values[name] = None
        bars.append(Bar(ts_ms=start_ms + i * step_ms, **values))
    return bars


@pytest.mark.parametrize("metric", ["candlestick", "limit_orders", "trades", "spread"])
@pytest.mark.parametrize("increments", [(None, None), ("0.01", "0.00001"), ("1", "0.1")])
def test_each_series_row_from_its_stored_columns_is_bar_s_figures_as_served(metric, increments):
    """A series fetches only its metric's columns and computes its row from them: the row is
    Bar's derived figures from the whole bar, rounded as precision.py serves them (a column
    left out or a figure derived differently would change an answer)."""
    import random

    from market import series
    from market.precision import Rounding

    rng = random.Random(7)
    bars = _random_bars(rng, 400, JAN1, HOUR_MS)
    rounding = Rounding(*increments)
    columns = series.METRICS[metric]["columns"]
    sides = [None, *series.LIMIT_ORDER_SIDES.values()] if metric == "limit_orders" else [None]
    for keep in sides:
        stored = [tuple(getattr(bar, name) for name in columns) for bar in bars]
        expected = []
        for bar in bars:
            values = _reference_row(bar, metric, keep)
            if values is not None:
                expected.append({"date": series.DATE_FORMAT["hourly"](bar.ts_ms), **rounding.row(values)})
        got = series.rows(stored, metric, "hourly", keep=keep, rounding=rounding)
        assert orjson.dumps(got) == orjson.dumps(expected)
        assert [list(row) for row in got] == [list(row) for row in expected]  # the same keys in order


@pytest.fixture
def history_window(settings, monkeypatch):
    """Closed ranges reused for 1 s, on a clock the test moves; `fetches` counts the reads
    of the bar store."""
    settings.HISTORY_CACHE_SECONDS = 1.0
    clock = [1000.0]
    monkeypatch.setattr("config.recent.time.monotonic", lambda: clock[0])
    from market import selectors

    selectors._recent_history.clear()
    fetches, read = [], selectors.fetch_prepared
    monkeypatch.setattr(selectors, "fetch_prepared",
                        lambda *args, **kwargs: fetches.append(args) or read(*args, **kwargs))
    return clock, fetches


def _january_rows(btc):
    from market.selectors import series_rows

    return series_rows(pair=btc, metric="candlestick", granularity="day", resolution="daily", from_ms=JAN1,
                       to_ms=JAN1 + 31 * DAY_MS)


def test_a_closed_range_is_read_once_per_history_window_and_a_correction_shows_after_it(btc, history_window):
    clock, fetches = history_window
    first = _january_rows(btc)
    assert _january_rows(btc) is first and len(fetches) == 1
    bars_write(pair=btc, granularity="day", bars=[trade_bar(JAN1, [41000.0, 41010.0])])
    assert _january_rows(btc)[0]["open"] == 42000.0  # within the window: the answer read before it
    clock[0] += 1.01
    assert _january_rows(btc)[0]["open"] == 41000.0 and len(fetches) == 2


def test_a_range_reaching_into_the_current_period_reads_that_period_every_time(btc, history_window, monkeypatch):
    """The days that have ended are reused as a closed range is; the current day is read on
    every request, so a bar written into it shows at once."""
    _, fetches = history_window
    monkeypatch.setattr("config.clock.now_ms", lambda: JAN1 + 30 * DAY_MS + HOUR_MS)  # Jan 31, 01:00
    first = _january_rows(btc)
    assert len(fetches) == 2 and len(first) == 31
    assert [fetched[1][1:] for fetched in fetches] == [[JAN1, JAN1 + 30 * DAY_MS],
                                                       [JAN1 + 30 * DAY_MS, JAN1 + 31 * DAY_MS]]
    bars_write(pair=btc, granularity="hour", bars=[trade_bar(JAN1 + 30 * DAY_MS, [50000.0, 50001.0])])
    again = _january_rows(btc)
    assert len(fetches) == 3 and again[:30] == first[:30] and again[30]["high"] == 50001.0


def test_a_range_of_more_bars_than_the_cache_keeps_is_read_every_time(btc, history_window):
    from market.selectors import HISTORY_CACHE_MAX_BARS, series_rows

    _, fetches = history_window
    for _ in range(2):
        series_rows(pair=btc, metric="candlestick", granularity="hour", resolution="hourly",
                    from_ms=JAN1, to_ms=JAN1 + (HISTORY_CACHE_MAX_BARS + 1) * HOUR_MS)
    assert len(fetches) == 2


def test_an_encoded_series_body_is_reused_only_with_the_very_rows_it_was_made_of(settings, monkeypatch):
    """The loop's answers reuse a body encoded from shared rows, never past those rows: a
    new read of the range (another list, even with other values) is encoded again."""
    from market import api

    settings.HISTORY_CACHE_SECONDS = 1.0
    api._recent_bodies.clear()
    encoded = []
    monkeypatch.setitem(api.RENDER, "json", lambda document: encoded.append(1) or orjson.dumps(document))
    meta = {"symbol": "BTC-USDT", "sides": ["ohlc"], "count": 1}
    rows = [{"date": "2024-01-01", "open": 1.0}]
    first = api._encoded("json", {"meta": meta, "data": rows})
    assert api._encoded("json", {"meta": dict(meta), "data": rows}) is first and len(encoded) == 1
    corrected = [{"date": "2024-01-01", "open": 2.0}]
    assert b"2.0" in api._encoded("json", {"meta": meta, "data": corrected}) and len(encoded) == 2
    assert api._encoded("json", {"meta": meta, "data": list(corrected)}) and len(encoded) == 3
