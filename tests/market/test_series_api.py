"""POST /api/v1/market/* and GET /api/v1/rank/top."""

from datetime import datetime, timezone

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


@pytest.mark.parametrize("metric", ["candlestick", "limit_orders", "trades", "spread"])
def test_each_series_reads_only_the_columns_it_fetches(metric):
    """A series fetches only its metric's columns: its rows from those columns are the rows
    from the whole bar (a column left out would silently read as Bar's default)."""
    import random

    from market import series
    from market.bars import BAR_FIELDS, Bar

    rng = random.Random(7)
    whole = [Bar(*(JAN1 + i * DAY_MS if name == "ts_ms" else rng.randint(1, 9) if name.endswith(("count", "samples"))
                   else rng.uniform(1, 100) for name in BAR_FIELDS)) for i in range(5)]
    columns = series.METRICS[metric]["columns"]
    fetched = [Bar(**{name: getattr(bar, name) for name in columns}) for bar in whole]
    assert series.rows(fetched, metric, "daily") == series.rows(whole, metric, "daily")


@pytest.fixture
def history_window(settings, monkeypatch):
    """Closed ranges reused for 1 s, on a clock the test moves; `fetches` counts the reads
    of the bar store."""
    settings.HISTORY_CACHE_SECONDS = 1.0
    clock = [1000.0]
    monkeypatch.setattr("config.recent.time.monotonic", lambda: clock[0])
    from market import selectors

    selectors._recent_history._entries.clear()
    fetches, read = [], selectors.bars_range
    monkeypatch.setattr(selectors, "bars_range", lambda **kwargs: fetches.append(kwargs) or read(**kwargs))
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


def test_a_range_reaching_into_the_current_period_is_read_every_time(btc, history_window, monkeypatch):
    _, fetches = history_window
    monkeypatch.setattr("config.clock.now_ms", lambda: JAN1 + 30 * DAY_MS + HOUR_MS)  # Jan 31, 01:00
    _january_rows(btc)
    _january_rows(btc)
    assert len(fetches) == 2


def test_a_range_of_more_bars_than_the_cache_keeps_is_read_every_time(btc, history_window):
    from market.selectors import HISTORY_CACHE_MAX_BARS, series_rows

    _, fetches = history_window
    for _ in range(2):
        series_rows(pair=btc, metric="candlestick", granularity="hour", resolution="hourly",
                    from_ms=JAN1, to_ms=JAN1 + (HISTORY_CACHE_MAX_BARS + 1) * HOUR_MS)
    assert len(fetches) == 2
