"""The live SSE feed, driven through its ASGI app."""

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from accounts.services import account_payment_set, api_key_create, api_key_revoke
from market.bars import Bar
from market.services import bars_write
from streaming import hub, live
from streaming.services import subscription_remove, subscription_upsert

from .sse_harness import OpenStream

pytestmark = pytest.mark.django_db(transaction=True)
EVENTS = "/api/v1/streams/binance/BTC/USDT/events"


@pytest.fixture
def subscribed(account, btc):
    subscription_upsert(account=account, pair=btc, metrics=["trade", "quote"])
    return account


@pytest.fixture
def key(subscribed):
    return api_key_create(account=subscribed, name="sse")


def bearer(created):
    return {"Authorization": f"Bearer {created.plaintext}", "Accept": "text/event-stream"}


def run(coro):
    return asyncio.run(coro)


async def in_a_thread(service, **kwargs):
    """Call a service from the test's event loop as a request's thread would. Outside any
    async_to_sync, asgiref runs it on one thread kept for the whole process: a connection
    left open there stays checked out of the pool past the run, and the test database
    cannot be dropped."""
    def call():
        try:
            return service(**kwargs)
        finally:
            connections.close_all()  # the thread returns its connection, as sse_auth's do

    return await sync_to_async(call)()


def finish(path, headers, query=""):
    """Open a stream that is expected to be refused (or to end) and return it."""
    async def go():
        return await OpenStream(path, headers, query).start().until(lambda s: s.finished)

    return run(go())


def live_bar(ts_ms, price=100.0):
    return Bar(ts_ms=ts_ms, trade_count=1, open=price, high=price, low=price, close=price, volume=1.0,
               buy_volume=1.0, notional=price, price_mean=price, book_samples=1, bid_amount_sum=2.0,
               ask_amount_sum=1.0, quote_count=1, bid_price=price - 1, ask_price=price + 1,
               spread_bps_sum=1.0, spread_bps_min=1.0, spread_bps_max=1.0)


def now_ms():
    return int(time.time() * 1000)


@pytest.mark.parametrize("headers, status, code", [
    ({}, 401, "unauthorized"),
    ({"Authorization": "Bearer nope"}, 401, "unauthorized"),
])
def test_bad_keys_are_refused_with_the_envelope(key, headers, status, code):
    async def go():
        stream = await OpenStream(EVENTS, {**headers, "Accept": "text/event-stream"}).start().until(lambda s: s.finished)
        return stream

    stream = run(go())
    assert stream.status == status and stream.headers["content-type"] == "application/json"
    assert stream.json()["error"]["code"] == code
    assert stream.json()["error"]["request_id"] == stream.headers["x-request-id"]


def test_unknown_pair_is_404(key):
    stream = finish("/api/v1/streams/binance/FOO/BAR/events", bearer(key))
    assert stream.status == 404 and stream.json()["error"]["code"] == "not_found"


def test_a_pair_not_subscribed_is_402(key, catalog):
    stream = finish("/api/v1/streams/kraken/BTC/USD/events", bearer(key))
    assert stream.status == 402
    assert stream.json()["error"]["code"] == "payment_required"
    assert stream.json()["error"]["details"]["reason"] == "not_subscribed"


def test_lapsed_payment_is_402(key, subscribed):
    account_payment_set(account=subscribed, payment="lapsed")
    stream = finish(EVENTS, bearer(key))
    assert stream.status == 402 and stream.json()["error"]["details"]["reason"] == "payment_lapsed"


def test_a_plan_without_streaming_is_403(key, subscribed):
    from billing.services import plan_upsert

    subscribed.plan = plan_upsert(name="data", features=["api"], monthly_requests=10, monthly_bytes=10)
    subscribed.save()
    stream = finish(EVENTS, bearer(key))
    assert stream.status == 403 and stream.json()["error"]["code"] == "plan_forbidden"


def test_a_down_pub_sub_backend_is_502(key, monkeypatch):
    async def down(timeout=2.0):
        return False

    monkeypatch.setattr(hub, "backend_available", down)
    stream = finish(EVENTS, bearer(key))
    assert stream.status == 502 and stream.json()["error"]["code"] == "temporarily_unavailable"


def test_a_stream_opens_with_retry_and_status_then_delivers_bars(key, btc):
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: any(e["event"] == "status" for e in s.events))
        assert stream.status == 200
        await in_a_thread(live.publish_bars, pair=btc, bars=[live_bar(now_ms() - 1000)])
        await stream.until(lambda s: any(e["event"] == "bar" for e in s.events))
        await stream.close()
        return stream

    stream = run(go())
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["x-accel-buffering"] == "no" and "no-cache" in stream.headers["cache-control"]
    kinds = [e["event"] for e in stream.events]
    assert kinds[:2] == ["retry", "status"]
    bar = next(e for e in stream.events if e["event"] == "bar")
    assert set(bar["data"]) == {"ts_ms", "open", "high", "low", "close", "volume", "buy_volume", "sell_volume",
                                "trade_count", "vwap", "bid_price", "ask_price", "mid_price", "spread_bps"}
    assert bar["id"] == f"{bar['data']['ts_ms']}.0"


def test_the_bars_of_a_catch_up_are_pushed_in_order_so_an_open_stream_has_no_gap(key, btc):
    catch_up = [live_bar(now_ms() - 600_000 + i * 1000) for i in range(25)]  # more than a listener queues

    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await in_a_thread(live.publish_bars, pair=btc, bars=catch_up)
        await stream.until(lambda s: sum(e["event"] == "bar" for e in s.events) >= 25 or s.finished)
        await stream.close()
        return stream

    events = run(go()).events
    assert not [e for e in events if e["event"] == "error"]
    assert [e["data"]["ts_ms"] for e in events if e["event"] == "bar"] == [bar.ts_ms for bar in catch_up]


def test_resume_with_last_event_id_replays_what_was_missed(key, btc):
    start = (now_ms() // 1000 - 30) * 1000
    bars_write(pair=btc, granularity="second", bars=[live_bar(start + i * 1000) for i in range(10)])

    async def go(headers, query=""):
        stream = await OpenStream(EVENTS, headers, query).start().until(
            lambda s: sum(e["event"] == "bar" for e in s.events) >= 6)
        await stream.close()
        return stream

    stream = run(go({**bearer(key), "Last-Event-ID": f"{start + 3000}.0"}))
    replayed = [e["data"]["ts_ms"] for e in stream.events if e["event"] == "bar"]
    assert replayed == [start + i * 1000 for i in range(4, 10)]
    via_query = run(go(bearer(key), f"lastEventId={start + 3000}.0"))
    assert [e["data"]["ts_ms"] for e in via_query.events if e["event"] == "bar"] == replayed


@pytest.mark.parametrize("cursor", ["1.0", "garbage"])
def test_a_cursor_that_cannot_be_resumed_sends_stream_reset(key, cursor):
    async def go():
        stream = await OpenStream(EVENTS, {**bearer(key), "Last-Event-ID": cursor}).start().until(
            lambda s: any(e["event"] == "stream-reset" for e in s.events))
        await stream.close()
        return stream

    reset = next(e for e in run(go()).events if e["event"] == "stream-reset")
    assert reset["data"]["reason"]


def test_unsubscribing_closes_the_stream(key, btc, subscribed):
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await in_a_thread(subscription_remove, account=subscribed, pair=btc)
        await stream.until(lambda s: s.finished)
        return stream

    closed = [e for e in run(go()).events if e["event"] == "stream-closed"]
    assert closed and "unsubscribed" in closed[0]["data"]["reason"]


def test_dropping_one_metric_narrows_the_bars(key, btc, subscribed):
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await in_a_thread(subscription_remove, account=subscribed, pair=btc, metric="trade")
        await asyncio.sleep(0.1)
        await in_a_thread(live.publish_bars, pair=btc, bars=[live_bar(now_ms() - 500)])
        await stream.until(lambda s: any(e["event"] == "bar" for e in s.events))
        await stream.close()
        return stream

    bar = next(e for e in run(go()).events if e["event"] == "bar")
    assert set(bar["data"]) == {"ts_ms", "bid_price", "ask_price", "mid_price", "spread_bps"}


def test_revoking_the_key_closes_the_stream(key):
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await in_a_thread(api_key_revoke, api_key=key.api_key, via="command")
        await stream.until(lambda s: s.finished)
        return stream

    assert any(e["event"] == "stream-closed" for e in run(go()).events)


def test_a_lapsed_payment_closes_the_stream(key, subscribed):
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await in_a_thread(account_payment_set, account=subscribed, payment="lapsed")
        await stream.until(lambda s: s.finished)
        return stream

    assert any("lapsed" in (e["data"] or {}).get("reason", "") for e in run(go()).events
               if e["event"] == "stream-closed")


def test_a_client_that_falls_behind_gets_an_error_and_is_closed(key, btc):
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        base = now_ms() - 5000
        for i in range(25):  # more than the listener's bounded queue, before it can drain
            hub.get_listener_manager().add_to_queues(hub.pair_channel(btc.pk), hub.Event(
                hub.pair_channel(btc.pk), "bars", {"rows": [{"ts_ms": base + i, "close": 1.0}]}))
        await stream.until(lambda s: s.finished)
        return stream

    error = next(e for e in run(go()).events if e["event"] == "error")
    assert error["data"]["code"] == "slow_consumer" and error["data"]["last_event_id"]


def test_a_burst_of_scheme_events_stored_at_once_reaches_an_open_stream_whole(key, btc):
    """A detector warm-up or a busy step stores dozens of scheme events in one commit: they
    are one message to the listeners, not a burst that reads as a slow client."""
    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        live.publish_scheme_events(pair_id=btc.pk, events=[{"id": n, "scheme": "layering"} for n in range(1, 26)])
        return await stream.until(lambda s: sum(e["event"] == "scheme-event" for e in s.events) >= 25 or s.finished)

    stream = run(go())
    assert [e["data"]["id"] for e in stream.events if e["event"] == "scheme-event"] == list(range(1, 26))
    assert not stream.finished


def test_a_token_opens_a_stream_for_its_pair_only(key, btc, client_for):
    body = client_for(key.plaintext).post("/api/v1/streams/binance/BTC/USDT/token").json()
    assert body["events_url"].startswith(EVENTS + "?token=")
    token = body["token"]

    async def go(path):
        stream = OpenStream(path, {"Accept": "text/event-stream"}, f"token={token}").start()
        await stream.until(lambda s: s.status is not None and (s.finished or len(s.events) >= 2))
        if not stream.finished:
            await stream.close()
        return stream

    assert run(go(EVENTS)).status == 200
    other = run(go("/api/v1/streams/coinbase/ETH/USD/events"))
    assert other.status == 401


def test_a_token_stops_working_when_its_key_is_revoked_or_it_expires(key, btc, client_for, settings):
    token = client_for(key.plaintext).post("/api/v1/streams/binance/BTC/USDT/token").json()["token"]
    settings.SSE_TOKEN_SECONDS = -1
    stream = finish(EVENTS, {}, f"token={token}")
    assert stream.status == 401 and "expired" in stream.json()["error"]["message"]
    settings.SSE_TOKEN_SECONDS = 300
    api_key_revoke(api_key=key.api_key, via="command")
    stream = finish(EVENTS, {}, f"token={token}")
    assert stream.status == 401


def test_streams_are_never_metered(key, client_for):
    usage_before = client_for(key.plaintext).get("/api/v1/me/usage").json()

    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await stream.close()

    run(go())
    finish("/api/v1/streams/kraken/BTC/USD/events", bearer(key))
    usage_after = client_for(key.plaintext).get("/api/v1/me/usage").json()
    assert usage_after["requests"] == usage_before["requests"] and usage_after["bytes"] == usage_before["bytes"]


def scheme_detection(ts_ms):
    return {"scheme": "vacuuming", "side": "bid", "direction": "down", "ts_ms": ts_ms, "price": 100.0,
            "confidence": 0.7, "alert_score": 40.0, "build": {"start_ms": ts_ms - 3000}, "collapse": {}}


def test_scheme_events_are_pushed_with_a_resumable_id(key, btc):
    from schemes.services import scheme_events_store

    async def go():
        stream = await OpenStream(EVENTS, bearer(key)).start().until(lambda s: len(s.events) >= 2)
        await in_a_thread(scheme_events_store, pair=btc, detections=[scheme_detection(now_ms())])
        await stream.until(lambda s: any(e["event"] == "scheme-event" for e in s.events))
        await stream.close()
        return stream

    event = next(e for e in run(go()).events if e["event"] == "scheme-event")
    assert event["data"]["scheme"] == "vacuuming" and event["id"] == f"0.{event['data']['id']}"


def test_resume_replays_missed_scheme_events(key, btc):
    from schemes.services import scheme_events_store

    first = scheme_events_store(pair=btc, detections=[scheme_detection(now_ms() - 5000)])[0]
    scheme_events_store(pair=btc, detections=[scheme_detection(now_ms() - 1000)])

    async def go():
        stream = OpenStream(EVENTS, {**bearer(key), "Last-Event-ID": f"{now_ms() - 60_000}.{first.pk}"}).start()
        await stream.until(lambda s: any(e["event"] == "scheme-event" for e in s.events))
        await stream.close()
        return stream

    replayed = [e["data"]["id"] for e in run(go()).events if e["event"] == "scheme-event"]
    assert replayed == [first.pk + 1]
