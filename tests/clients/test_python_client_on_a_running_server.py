"""The Python client (clients/python, `marketdata`) against a running server with the
seeded demo, in the mode the tests run in: every method, sync and async, in JSON and in
TOON, agrees with the API's own JSON; its frames equal the JSON rows; refusals and a spent
quota raise their typed exceptions with the envelope."""

import asyncio
import datetime as dt

import httpx
import pytest

from marketdata import (AsyncClient, AuthenticationError, Client, Forbidden, InvalidRequest, LatestBar, NotFound,
                        PairList, PaymentRequired, QuotaExceeded, Ranking, SchemeHistory, Series, SeriesMeta,
                        Snapshot, StreamStatus, StreamToken, Subscription, Unsubscribed, Usage)
from tests.api.demo_site import demo_server
from tests.integration.servers import manage

# pytest-django makes the test database only for tests that ask for it where it can see
# it (a mark or a fixture argument, not getfixturevalue); in full mode the server uses it.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SUBSCRIBED = "binance/BTC/USDT"  # one of the demo account's paid streams
UNSUBSCRIBED = "kraken/ADA/USD"
TODAY = dt.datetime.now(dt.timezone.utc).date()
START, END = TODAY - dt.timedelta(days=6), TODAY - dt.timedelta(days=1)  # ended days: the same answer every time
SERIES = {"exchange": "binance", "symbol": "BTC-USDT", "start": START.isoformat(), "end": END.isoformat()}
HOUR_MS = 3_600_000


@pytest.fixture
def demo(tmp_path):
    with demo_server(tmp_path) as (base, key, env):
        seed_history(env)
        yield base, key, env


def seed_history(env, days: int = 8):
    """Hourly (and so daily) history of the one pair these tests read, a few seconds'
    work (seed_demo would do every pair, and replace the demo key)."""
    manage(env, "shell", "-c", (
        "import time\n"
        "from django.conf import settings\n"
        "from market.selectors import pair_get\n"
        "from market.services import history_seed\n"
        "pair = pair_get(exchange='binance', base='BTC', quote='USDT')\n"
        f"history_seed(pairs=[pair], days={days}, seed=settings.SIMULATOR_SEED, now_ms=int(time.time() * 1000))"))


def raw(base, key, method, path, **kwargs):
    """The API's own JSON document, for comparison."""
    response = httpx.request(method, f"{base}/api/v1{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30,
                             **kwargs)
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def a_fixed_window():
    """Two past days of hour bars, so both formats and both clients read the same bars."""
    to_ms = (int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) // HOUR_MS - 1) * HOUR_MS
    return to_ms - 48 * HOUR_MS, to_ms


def every_call(client, window):
    """(name, result) of every method but `live` (the feed has tests of its own)."""
    from_ms, to_ms = window
    return {
        "candlestick": client.candlestick("binance", "BTC-USDT", START, END),
        "limit_orders": client.limit_orders("binance", "BTC-USDT", START, END),
        "limit_orders_bid": client.limit_orders("binance", "BTC-USDT", START, END, side="bid_amount"),
        "trades": client.trades("binance", "BTC-USDT", START, END),
        "spread": client.spread("binance", "BTC-USDT", START, END, resolution="hourly"),
        "top_tokens": client.top_tokens("binance", n=5),
        "usage": client.usage(),
        "pairs": client.pairs(),
        "subscribe": client.subscribe(SUBSCRIBED, metrics=["trade"]),  # already held: changes nothing
        "unsubscribe": client.unsubscribe(UNSUBSCRIBED),  # not held: 204 all the same
        "status": client.status(SUBSCRIBED),
        "snapshot": client.snapshot(SUBSCRIBED, ["trade", "book", "quote"], "hour", from_ms=from_ms, to_ms=to_ms),
        "latest": client.latest(SUBSCRIBED),
        "stream_token": client.stream_token(SUBSCRIBED),
        "schemes": client.schemes(SUBSCRIBED, lookback_hours=24, limit=100),
    }


async def every_call_async(client, window):
    from_ms, to_ms = window
    calls = {
        "candlestick": client.candlestick("binance", "BTC-USDT", START, END),
        "limit_orders": client.limit_orders("binance", "BTC-USDT", START, END),
        "limit_orders_bid": client.limit_orders("binance", "BTC-USDT", START, END, side="bid_amount"),
        "trades": client.trades("binance", "BTC-USDT", START, END),
        "spread": client.spread("binance", "BTC-USDT", START, END, resolution="hourly"),
        "top_tokens": client.top_tokens("binance", n=5),
        "usage": client.usage(),
        "pairs": client.pairs(),
        "subscribe": client.subscribe(SUBSCRIBED, metrics=["trade"]),
        "unsubscribe": client.unsubscribe(UNSUBSCRIBED),
        "status": client.status(SUBSCRIBED),
        "snapshot": client.snapshot(SUBSCRIBED, ["trade", "book", "quote"], "hour", from_ms=from_ms, to_ms=to_ms),
        "latest": client.latest(SUBSCRIBED),
        "stream_token": client.stream_token(SUBSCRIBED),
        "schemes": client.schemes(SUBSCRIBED, lookback_hours=24, limit=100),
    }
    names = list(calls)
    return dict(zip(names, await asyncio.gather(*calls.values())))


TYPES = {"candlestick": Series, "limit_orders": Series, "limit_orders_bid": Series, "trades": Series,
         "spread": Series, "top_tokens": Ranking, "usage": Usage, "pairs": PairList, "subscribe": Subscription,
         "unsubscribe": Unsubscribed, "status": StreamStatus, "snapshot": Snapshot, "latest": LatestBar,
         "stream_token": StreamToken, "schemes": SchemeHistory}
# what differs from one call to the next (counters, the clock, a fresh token)
MOVING = {"usage", "status", "latest", "stream_token", "schemes"}


def assert_same_answers(got, expected):
    for name in TYPES:
        assert type(got[name]) is type(expected[name]), name
        if name not in MOVING:
            assert got[name] == expected[name], name
    assert got["schemes"].events == expected["schemes"].events  # its window moves with the clock
    assert got["status"].metrics.keys() == expected["status"].metrics.keys()


def assert_like_the_json_api(results, base, key, window):
    for name, result in results.items():
        assert isinstance(result, TYPES[name]), name
        assert result.request_id, name
        assert result.quota is not None and result.quota.requests_limit > 0, name
    for endpoint, name, extra in (("candlestick", "candlestick", {}), ("limit-orders", "limit_orders", {}),
                                  ("limit-orders", "limit_orders_bid", {"side": "bid_amount"}),
                                  ("trades", "trades", {}), ("spread", "spread", {"resolution": "hourly"})):
        document = raw(base, key, "POST", f"/market/{endpoint}", json={**SERIES, **extra})
        assert results[name].meta == SeriesMeta(**document["meta"]), name
        assert results[name].rows == document["data"], name
        assert len(document["data"]) == (6 * 24 if extra.get("resolution") == "hourly" else 6), name
    assert set(results["limit_orders_bid"].rows[0]) == {"date", "bid_amount", "bid_notional", "bid_orders"}
    ranking = raw(base, key, "GET", "/rank/top", params={"exchange": "binance", "n": 5})
    assert [(t.rank, t.symbol, t.pairs) for t in results["top_tokens"]] == [
        (t["rank"], t["symbol"], t["pairs"]) for t in ranking["tokens"]]
    pairs = raw(base, key, "GET", "/streams")["pairs"]
    assert [(p.path, p.subscribed, p.metrics) for p in results["pairs"]] == [
        (f"{p['exchange']}/{p['base']}/{p['quote']}", p["subscribed"], p["metrics"]) for p in pairs]
    assert results["subscribe"].metrics == ["trade", "book", "quote"] and not results["subscribe"].created
    status = results["status"]
    assert (status.exchange, status.base, status.quote, status.subscribed) == ("binance", "BTC", "USDT", True)
    assert status.state in ("REQUESTED", "WARMING", "READY", "STALE", "FAILED")
    assert set(status.metrics) == {"trade", "book", "quote"}
    from_ms, to_ms = window
    snapshot = raw(base, key, "POST", f"/streams/{SUBSCRIBED}/snapshot",
                   json={"metrics": ["trade", "book", "quote"], "granularity": "hour", "from_ms": from_ms,
                         "to_ms": to_ms})
    assert results["snapshot"].bars == snapshot["bars"] and results["snapshot"].count == snapshot["count"]
    latest = raw(base, key, "GET", f"/streams/{SUBSCRIBED}/live")
    assert (results["latest"].bar is None) == (latest is None)
    assert "?token=" in results["stream_token"].events_url and results["stream_token"].expires_in_seconds > 0
    usage = results["usage"]
    assert usage.plan == "pro" and usage.requests.used > 0 and usage.stream_pairs == 2
    assert sum(line.requests for line in usage.by_key_and_endpoint) == usage.requests.used
    schemes = raw(base, key, "GET", f"/streams/{SUBSCRIBED}/schemes", params={"lookback_hours": 24, "limit": 100})
    assert [e.id for e in results["schemes"]] == [e["id"] for e in schemes["events"]]


def test_every_method_sync_and_async_in_json_and_toon_answers_as_the_api(demo):
    base, key, _ = demo
    window = a_fixed_window()
    with Client(key, base) as client:
        in_json = every_call(client, window)
    assert_like_the_json_api(in_json, base, key, window)
    with Client(key, base, format="toon") as client:
        in_toon = every_call(client, window)
    assert_same_answers(in_toon, in_json)
    assert in_toon["candlestick"].quota.bytes_used > in_json["candlestick"].quota.bytes_used

    async def run_async(format):
        async with AsyncClient(key, base, format=format) as client:
            return await every_call_async(client, window)

    for format in ("json", "toon"):
        assert_same_answers(asyncio.run(run_async(format)), in_json)

    # the live feed, sync and async: it opens with the pair's status (no ingestion runs here;
    # the feed across a restarted server is test_python_client_live_feed_on_a_running_server)
    with Client(key, base) as client, client.live(SUBSCRIBED) as feed:
        opening = next(feed)
    assert opening.event == "status" and isinstance(opening.data, StreamStatus) and opening.data.base == "BTC"

    async def first_event():
        async with AsyncClient(key, base) as client:
            async with client.live(SUBSCRIBED) as feed:
                return await feed.__anext__()

    opening = asyncio.run(first_event())
    assert opening.event == "status" and opening.data.quote == "USDT"
    # the quota headers follow the account's counters call by call
    with Client(key, base) as client:
        first = client.candlestick("binance", "BTC-USDT", START, END).quota
        second = client.candlestick("binance", "BTC-USDT", START, END).quota
    assert second.requests_used == first.requests_used + 1
    assert second.requests_remaining == first.requests_remaining - 1
    assert second.resets_at.day == 1 and second.resets_at.tzinfo is not None


def test_frames_equal_the_json_rows_in_pandas_and_polars(demo):
    import pandas as pd
    import polars as pl

    base, key, _ = demo
    window = a_fixed_window()
    with Client(key, base, format="toon") as client:
        candles = client.candlestick("binance", "BTC-USDT", START, END)
        snapshot = client.snapshot(SUBSCRIBED, ["trade", "quote"], "hour", from_ms=window[0], to_ms=window[1])
    rows = raw(base, key, "POST", "/market/candlestick", json=SERIES)["data"]
    bars = raw(base, key, "POST", f"/streams/{SUBSCRIBED}/snapshot",
               json={"metrics": ["trade", "quote"], "granularity": "hour", "from_ms": window[0],
                     "to_ms": window[1]})["bars"]

    def utc_ms(value):
        return int(dt.datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=dt.timezone.utc)
                   .timestamp() * 1000)

    frame = candles.to_pandas()
    assert str(frame["date"].dtype) == "datetime64[ms, UTC]"
    assert str(frame["open"].dtype) == "float64" and str(frame["observation_count"].dtype) == "Int64"
    expected = pd.DataFrame(rows)
    expected["date"] = pd.to_datetime([utc_ms(d) for d in expected["date"]], unit="ms", utc=True).astype(
        "datetime64[ms, UTC]")
    expected = expected.astype({"observation_count": "Int64"} | {c: "float64" for c in expected.columns
                                                                 if c not in ("date", "observation_count")})
    pd.testing.assert_frame_equal(frame, expected)

    polars = candles.to_polars()
    assert polars.schema["date"] == pl.Datetime("ms", "UTC") and polars.schema["observation_count"] == pl.Int64
    assert polars.to_dicts() == [
        {**row, "date": dt.datetime.fromtimestamp(utc_ms(row["date"]) / 1000, dt.timezone.utc),
         **{c: float(v) for c, v in row.items() if c not in ("date", "observation_count")}} for row in rows]

    bar_frame = snapshot.to_polars()
    assert bar_frame.schema["ts"] == pl.Datetime("ms", "UTC")
    assert len(bars) == 48
    assert [{**row, "ts": int(row["ts"].timestamp() * 1000)} for row in bar_frame.to_dicts()] == [
        {"ts": bar["ts_ms"], **{c: v for c, v in bar.items() if c != "ts_ms"}} for bar in bars]
    bar_pandas = snapshot.to_pandas()
    assert str(bar_pandas["ts"].dtype) == "datetime64[ms, UTC]"
    assert bar_pandas["ts"].tolist() == [pd.Timestamp(bar["ts_ms"], unit="ms", tz="UTC") for bar in bars]
    assert bar_pandas["close"].tolist() == [bar["close"] for bar in bars]


def test_refusals_raise_their_typed_exception_with_the_envelope(demo):
    base, key, env = demo
    with Client(key, base, format="toon") as client:
        with pytest.raises(InvalidRequest) as raised:
            client.candlestick("binance", "BTC-USDT", END, START)  # start after end
        assert raised.value.status == 400 and raised.value.code == "invalid_parameter"
        assert raised.value.details["parameter"] and raised.value.request_id and raised.value.message
        with pytest.raises(InvalidRequest) as raised:
            client.candlestick("binance", "FOO-BAR", START, END)
        assert raised.value.details["parameter"] == "symbol"
        with pytest.raises(PaymentRequired) as raised:
            client.status(UNSUBSCRIBED)
        assert raised.value.status == 402 and raised.value.details == {"reason": "not_subscribed",
                                                                       "pair": UNSUBSCRIBED}
        with pytest.raises(PaymentRequired):
            next(iter(client.live(UNSUBSCRIBED)))  # the feed is refused at connect alike

    async def async_refusal():
        async with AsyncClient(key, base) as client:
            with pytest.raises(PaymentRequired) as raised:
                await client.status(UNSUBSCRIBED)
            assert raised.value.details["reason"] == "not_subscribed"
            with pytest.raises(PaymentRequired):
                await client.live(UNSUBSCRIBED).__anext__()

    asyncio.run(async_refusal())
    with Client(key, base) as client:
        with pytest.raises(NotFound) as raised:
            client.status("binance/NOPE/USDT")
        assert raised.value.status == 404 and raised.value.code == "not_found"
    with Client("mdp_live_" + "x" * 50, base) as stranger:
        with pytest.raises(AuthenticationError) as raised:
            stranger.usage()
        assert raised.value.status == 401 and raised.value.code == "unauthorized" and raised.value.request_id

    # a plan without streaming: 403 on the streams, series still served
    manage(env, "plan", "data-only", "--features", "api", "--monthly-requests", "1000", "--monthly-bytes", "10000000")
    manage(env, "account", "data@example.com", "--plan", "data-only")
    data_key = manage(env, "apikey", "data@example.com", "--name", "client tests").splitlines()[-1]
    with Client(data_key, base) as client:
        assert len(client.candlestick("binance", "BTC-USDT", START, END)) == 6
        with pytest.raises(Forbidden) as raised:
            client.pairs()
        assert raised.value.status == 403 and raised.value.code == "plan_forbidden"
        with pytest.raises(Forbidden):
            next(iter(client.live(SUBSCRIBED)))


def test_a_spent_monthly_quota_raises_quota_exceeded_and_is_not_waited_for_a_month(demo):
    base, _, env = demo
    manage(env, "plan", "tiny", "--features", "api,streaming", "--monthly-requests", "2",
           "--monthly-bytes", "100000000")
    manage(env, "account", "tiny@example.com", "--plan", "tiny")
    tiny_key = manage(env, "apikey", "tiny@example.com", "--name", "client tests").splitlines()[-1]
    with Client(tiny_key, base, wait_on_quota=True, max_wait=5) as client:
        first = client.candlestick("binance", "BTC-USDT", START, END)
        second = client.top_tokens("binance", n=1)
        assert (first.quota.requests_remaining, second.quota.requests_remaining) == (1, 0)
        started = dt.datetime.now(dt.timezone.utc)
        with pytest.raises(QuotaExceeded) as raised:
            client.candlestick("binance", "BTC-USDT", START, END)
        waited = (dt.datetime.now(dt.timezone.utc) - started).total_seconds()
    error = raised.value
    assert error.status == 429 and error.code == "quota_exceeded" and error.request_id
    next_month = (started.replace(day=1, hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=32)).replace(
        day=1)
    assert error.resets_at == next_month
    assert error.retry_after == pytest.approx((next_month - started).total_seconds(), abs=5)
    assert waited < 3  # a month's wait is beyond max_wait: raised at once
    with Client(tiny_key, base) as client:  # /me/usage is never refused for quota
        assert client.usage().requests.remaining == 0
