"""POST .../snapshot: fields per metric, defaults, caps, validation, streaming."""

import pytest

from config import clock
from market.bars import HOUR_MS, Bar
from market.services import bars_write

from datetime import datetime, timezone

NOW = datetime(2026, 11, 20, 12, 0, 0, tzinfo=timezone.utc)
NOW_MS = int(NOW.timestamp() * 1000)
URL = "/api/v1/streams/binance/BTC/USDT/snapshot"


@pytest.fixture(autouse=True)
def frozen(monkeypatch):
    monkeypatch.setattr(clock, "utcnow", lambda: NOW)


def full_bar(ts, price=100.0, trades=True):
    bar = Bar(ts_ms=ts, book_samples=1, bid_amount_sum=3.0, ask_amount_sum=1.0, quote_count=1,
              bid_price=price - 0.5, ask_price=price + 0.5, spread_bps_sum=100.0, spread_bps_min=100.0,
              spread_bps_max=100.0)
    if trades:
        bar.trade_count, bar.open, bar.high, bar.low, bar.close = 2, price, price + 1, price - 1, price
        bar.volume, bar.buy_volume, bar.sell_volume, bar.notional = 2.0, 1.5, 0.5, 2 * price
        bar.price_mean = price
    return bar


@pytest.fixture
def subscribed(api, btc):
    assert api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT"},
                    format="json").status_code == 201
    return btc


@pytest.fixture
def seconds(subscribed):
    btc = subscribed
    bars = [full_bar(NOW_MS - 3000 * 1000 + i * 1000, trades=i % 3 != 0) for i in range(3000)]
    bars_write(pair=btc, granularity="second", bars=bars)
    btc.base.circulating_supply = 19_800_000.0
    btc.base.save()
    return bars


def snap(api, **body):
    return api.post(URL, body, format="json")


def test_bars_carry_exactly_the_fields_of_the_requested_metrics(api, seconds):
    body = snap(api, metrics=["trade"], granularity="second", from_ms=NOW_MS - 10_000, to_ms=NOW_MS).json()
    assert body["count"] == len(body["bars"]) == 10
    assert list(body["bars"][1]) == ["ts_ms", "open", "high", "low", "close", "volume", "buy_volume",
                                     "sell_volume", "trade_count", "vwap"]
    body = snap(api, metrics=["quote", "book"], granularity="second", from_ms=NOW_MS - 10_000, to_ms=NOW_MS).json()
    assert body["metrics"] == ["book", "quote"]
    bar = body["bars"][0]
    assert list(bar) == ["ts_ms", "bid_depth", "ask_depth", "imbalance", "circulating_supply", "bid_price",
                         "ask_price", "mid_price", "spread_bps"]
    assert bar["circulating_supply"] == 19_800_000.0 and bar["imbalance"] == 0.5 and bar["mid_price"] == 100.0


def test_circulating_supply_only_with_book(api, seconds):
    body = snap(api, metrics=["trade", "quote"], granularity="second", from_ms=NOW_MS - 5000, to_ms=NOW_MS).json()
    assert all("circulating_supply" not in bar for bar in body["bars"])


def test_a_requested_metric_without_data_in_a_bar_is_null(api, seconds):
    body = snap(api, metrics=["trade"], granularity="second", from_ms=NOW_MS - 3000 * 1000,
                to_ms=NOW_MS - 2990 * 1000).json()
    quiet = body["bars"][0]
    assert quiet["trade_count"] is None and quiet["open"] is None and quiet["volume"] is None


def test_envelope_fields(api, seconds):
    body = snap(api, metrics=["trade"], granularity="minute", from_ms=NOW_MS - HOUR_MS, to_ms=NOW_MS).json()
    assert {k: body[k] for k in ("exchange", "base", "quote", "granularity", "from_ms", "to_ms", "metrics")} == {
        "exchange": "binance", "base": "BTC", "quote": "USDT", "granularity": "minute",
        "from_ms": NOW_MS - HOUR_MS, "to_ms": NOW_MS, "metrics": ["trade"]}
    assert body["count"] == 50  # 3,000 seconds of bars in 50 minutes
    assert sum(b["trade_count"] for b in body["bars"]) == 2 * 2000


@pytest.mark.parametrize("granularity, lookback", [("second", HOUR_MS), ("minute", 24 * HOUR_MS),
                                                   ("hour", 7 * 24 * HOUR_MS), ("day", 30 * 24 * HOUR_MS)])
def test_default_window_is_a_lookback_to_now(api, seconds, granularity, lookback):
    body = snap(api, metrics=["trade"], granularity=granularity).json()
    assert body["to_ms"] == NOW_MS and body["from_ms"] == NOW_MS - lookback


@pytest.mark.parametrize("granularity, cap", [("second", 24 * HOUR_MS), ("minute", 7 * 24 * HOUR_MS),
                                              ("hour", 30 * 24 * HOUR_MS), ("day", 366 * 24 * HOUR_MS)])
def test_every_cap_holds_at_the_limit_and_refuses_past_it(api, seconds, granularity, cap):
    assert snap(api, metrics=["trade"], granularity=granularity, from_ms=NOW_MS - cap, to_ms=NOW_MS).status_code == 200
    response = snap(api, metrics=["trade"], granularity=granularity, from_ms=NOW_MS - cap - 1, to_ms=NOW_MS)
    assert response.status_code == 400
    details = response.json()["error"]["details"]
    assert details["parameter"] == "to_ms" and details["cap_ms"] == cap


@pytest.mark.parametrize("body, parameter", [
    ({"granularity": "second"}, "metrics"),
    ({"metrics": [], "granularity": "second"}, "metrics"),
    ({"metrics": ["trade", "depth"], "granularity": "second"}, "metrics"),
    ({"metrics": ["trade"]}, "granularity"),
    ({"metrics": ["trade"], "granularity": "week"}, "granularity"),
    ({"metrics": ["book"], "granularity": "day"}, "granularity"),
    ({"metrics": ["trade", "quote"], "granularity": "day"}, "granularity"),
    ({"metrics": ["trade"], "granularity": "second", "from_ms": 10, "to_ms": 5}, "from_ms"),
    ({"metrics": ["trade"], "granularity": "second", "from_ms": "yesterday"}, "from_ms"),
    ({"metrics": ["trade"], "granularity": "second", "to_ms": -1}, "to_ms"),
    ({"metrics": ["trade"], "granularity": "second", "to_ms": 10**20}, "to_ms"),
    ({"metrics": ["trade"], "granularity": "second", "from_ms": True}, "from_ms"),
])
def test_bad_snapshot_bodies_are_400(api, seconds, body, parameter):
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["parameter"] == parameter


def test_unknown_pair_is_404(api, seconds):
    response = api.post("/api/v1/streams/binance/FOO/USDT/snapshot", {"metrics": ["trade"], "granularity": "second"},
                        format="json")
    assert response.status_code == 404


@pytest.mark.parametrize("fmt", ["json", "toon"])
def test_a_large_snapshot_is_streamed_identically_and_metered_exactly(api, seconds, settings, fmt):
    import toon_format

    body = {"metrics": ["trade", "book", "quote"], "granularity": "second", "from_ms": NOW_MS - 3000 * 1000,
            "to_ms": NOW_MS, "format": fmt}
    before = api.get("/api/v1/me/usage").json()  # the subscription's own request and bytes
    whole = api.post(URL, body, format="json")
    assert not whole.streaming
    settings.SNAPSHOT_STREAM_ROWS = 100
    settings.SNAPSHOT_PAGE_ROWS = 700
    streamed = api.post(URL, body, format="json")
    assert streamed.streaming
    content = b"".join(streamed)
    assert content == whole.content
    decoded = toon_format.decode(content.decode()) if fmt == "toon" else __import__("json").loads(content)
    assert decoded["count"] == len(decoded["bars"]) == 3000
    usage = api.get("/api/v1/me/usage").json()
    assert usage["bytes"]["used"] == before["bytes"]["used"] + len(whole.content) + len(content)
    assert streamed["X-Quota-Requests-Used"] == str(before["requests"]["used"] + 2)


def test_live_is_null_until_a_bar_is_published_then_the_latest_bar(api, btc):
    from streaming.live import publish_bars

    api.post("/api/v1/streams", {"exchange": "binance", "base": "BTC", "quote": "USDT", "metrics": ["quote"]},
             format="json")
    assert api.get("/api/v1/streams/binance/BTC/USDT/live").json() is None
    publish_bars(pair=btc, bars=[full_bar(NOW_MS - 2000), full_bar(NOW_MS - 1000, price=101.0)])
    body = api.get("/api/v1/streams/binance/BTC/USDT/live").json()
    assert body == {"ts_ms": NOW_MS - 1000, "bid_price": 100.5, "ask_price": 101.5, "mid_price": 101.0,
                    "spread_bps": pytest.approx(99.0099, rel=1e-4)}


@pytest.mark.parametrize("method, action, body", [
    ("get", "status", None), ("get", "live", None), ("post", "token", None),
    ("post", "snapshot", {"metrics": ["trade"], "granularity": "minute"})])
def test_the_stream_data_of_a_pair_the_account_does_not_subscribe_is_402(api, btc, method, action, body):
    response = getattr(api, method)(f"/api/v1/streams/binance/BTC/USDT/{action}", body, format="json")
    assert response.status_code == 402, response.content
    assert response.json()["error"]["details"] == {"reason": "not_subscribed", "pair": "binance/BTC/USDT"}


def _random_bar(rng, ts: int) -> Bar:
    price = rng.choice([43000.25, 0.000123, 2.675, 1e-9, 1.005, 99999.995, rng.uniform(0.001, 1e5)])
    bar = Bar(ts_ms=ts)
    if rng.random() < 0.8:
        bar.trade_count = rng.randint(1, 50)
        bar.open, bar.high, bar.low, bar.close = (price * rng.uniform(0.99, 1.01) for _ in range(4))
        bar.volume = rng.choice([0.0, 0.125, rng.uniform(0, 1e4)])
        bar.buy_volume, bar.sell_volume = bar.volume / 2, bar.volume / 2
        bar.notional = bar.volume * price
    if rng.random() < 0.8:
        bar.book_samples = rng.randint(1, 3)
        bar.bid_amount_sum, bar.ask_amount_sum = rng.choice([(0.0, 0.0), (2.5, 2.5), (rng.uniform(0, 1e6), 1.0)])
    if rng.random() < 0.8:
        bar.quote_count = rng.randint(1, 9)
        bar.bid_price, bar.ask_price = price, price + rng.choice([0.0, 0.01, price * 1e-4])
    return bar


@pytest.mark.parametrize("increments", [(None, None), ("0.01", "0.00001"), ("0.00000001", "1")], ids=str)
def test_the_rows_of_a_page_made_column_by_column_are_the_bar_rows(increments):
    import random

    from market.bars import BAR_FIELDS
    from market.precision import Rounding
    from streaming import snapshot

    rng = random.Random(str(increments))
    rounding = Rounding(*increments)
    bars = [full_bar(1000, trades=True), full_bar(2000, trades=False), Bar(ts_ms=3000)]
    bars += [_random_bar(rng, 4000 + i * 1000) for i in range(3000)]
    for metrics in (["trade"], ["book"], ["quote"], ["trade", "book", "quote"], ["book", "quote"]):
        make = snapshot.page_maker(metrics, 19_800_000.0, rounding)
        columns = snapshot.stored_columns(metrics)
        for start in range(0, len(bars), 700):  # pages with and without bars of no data
            page = bars[start:start + 700]
            assert make([tuple(getattr(bar, c) for c in columns) for bar in page]) == [
                snapshot.row(bar, metrics, 19_800_000.0, rounding) for bar in page]
    assert set(snapshot.stored_columns(["trade", "book", "quote"])) <= set(BAR_FIELDS)


def test_a_page_holding_what_the_columns_do_not_expect_is_made_bar_by_bar():
    from streaming import snapshot

    odd = [full_bar(1000), full_bar(2000)]
    odd[0].open = 100  # an integer, served as it is stored
    odd[1].quote_count, odd[1].bid_price = 1, None  # quotes counted, one side missing
    metrics = ["trade", "book", "quote"]
    page = [tuple(getattr(bar, c) for c in snapshot.stored_columns(metrics)) for bar in odd]
    assert snapshot.page_maker(metrics, None)(page) == [snapshot.row(bar, metrics, None) for bar in odd]
    assert snapshot.page_maker(metrics, None)([]) == []
    empty = [Bar(ts_ms=1000), Bar(ts_ms=2000)]  # no metric has data on the page
    page = [tuple(getattr(bar, c) for c in snapshot.stored_columns(metrics)) for bar in empty]
    assert snapshot.page_maker(metrics, 5.0)(page) == [snapshot.row(bar, metrics, 5.0) for bar in empty]


def test_a_toon_document_written_in_pages_is_the_encoders_whole_document():
    import random

    import toon
    from streaming import snapshot

    rng = random.Random(7)
    values = [None, 0.0, 1.0, -5.0, 43000.0, 43000.25, 0.1, 1e15, 123456789.125, 0.0001, 2.5e-5, -0.0, 1e17, 7, -3]
    for _ in range(200):
        rows = [{"ts_ms": 1_700_000_000_000 + i * 1000, **{f"c{j}": rng.choice(values) for j in range(6)}}
                for i in range(rng.randint(1, 20))]
        pieces = snapshot.ToonPieces({"count": len(rows)}, len(rows), tuple(rows[0]))
        streamed = (pieces.opening + pieces.page(rows)).decode()
        assert streamed == toon.encode({"count": len(rows), "bars": rows})
