"""The live feed iterator against httpx.MockTransport: reading SSE, resuming with
Last-Event-ID after a lost connection, never yielding an event twice, and the exceptions
that end it."""

import asyncio
import json

import httpx
import pytest

from marketdata import AsyncClient, Client, PaymentRequired, SchemeEvent, StreamClosed, StreamStatus
from marketdata.streaming import SseMessage, parse_sse

KEY = "mdp_live_" + "b" * 50
EVENTS = "/api/v1/streams/binance/BTC/USDT/events"
STATUS = {"exchange": "binance", "base": "BTC", "quote": "USDT", "subscribed": True, "state": "READY",
          "signals": {"coverage_24h": 1, "heartbeat_ms": 5, "heartbeat_age_ms": 1},
          "metrics": {"trade": {"subscribed": True, "state": "READY", "coverage_24h": 1, "heartbeat_ms": 5}}}
SCHEME = {"id": 7, "ts_ms": 2000, "scheme": "layering", "direction": "up", "side": "bid", "price": 10,
          "confidence": 1, "alert_score": 2.5, "build": {"levels": 3}, "collapse": {}}


def bar(second: int, scheme: int = 0) -> str:
    return f"event: bar\nid: {second * 1000}.{scheme}\ndata: {json.dumps({'ts_ms': second * 1000, 'close': 5})}\n\n"


def scheme(second: int, scheme_id: int) -> str:
    return f"event: scheme-event\nid: {second * 1000}.{scheme_id}\ndata: {json.dumps({**SCHEME, 'id': scheme_id})}\n\n"


class Dropped(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A feed body that ends with a lost connection (or not, when `then` is None)."""

    def __init__(self, text: str, then: Exception | None = httpx.RemoteProtocolError("peer closed")):
        self.chunks, self.then = [text.encode()[i:i + 17] for i in range(0, len(text.encode()), 17)], then

    def __iter__(self):
        yield from self.chunks
        if self.then:
            raise self.then

    async def __aiter__(self):
        for chunk in self.chunks:
            yield chunk
        if self.then:
            raise self.then


def feed_answers(*bodies):
    """A handler answering each connection with the next body; records Last-Event-ID."""
    asked = []

    def handler(request):
        assert request.url.path == EVENTS
        asked.append(request.headers.get("Last-Event-ID"))
        body = bodies[len(asked) - 1]
        if isinstance(body, httpx.Response):
            return body
        return httpx.Response(200, stream=body, headers={"Content-Type": "text/event-stream"})

    return handler, asked


def test_parse_sse_joins_data_lines_and_skips_comments_and_retry():
    lines = ["retry: 3000", "", ": keep-alive", "", "event: bar", "id: 1.0", "data: {\"a\":", "data: 1}", "",
             "data:x", ""]
    assert list(parse_sse(lines)) == [SseMessage("bar", "{\"a\":\n1}", "1.0"), SseMessage("message", "x", None)]


def test_the_feed_resumes_after_a_lost_connection_from_the_last_id_and_skips_what_it_already_yielded():
    handler, asked = feed_answers(
        Dropped("retry: 3000\n\nevent: status\ndata: " + json.dumps(STATUS) + "\n\n" + bar(1) + bar(2) + scheme(2, 7)),
        # the replay repeats the scheme event (as a careless server could): skipped
        Dropped(scheme(2, 7) + bar(3, 7) + bar(4, 7), then=None),
        Dropped(bar(5, 7) + "event: stream-closed\ndata: {\"reason\": \"unsubscribed\"}\n\n", then=None))
    client = Client(KEY, "http://api.test", transport=httpx.MockTransport(handler))
    feed = client.live("binance/BTC/USDT", backoff=(0.001, 0.002))
    got = []
    with pytest.raises(StreamClosed) as closed:
        for event in feed:
            got.append(event)
    assert closed.value.reason == "unsubscribed" and closed.value.last_event_id == "5000.7"
    assert [(e.event, e.id) for e in got] == [
        ("status", None), ("bar", "1000.0"), ("bar", "2000.0"), ("scheme-event", "2000.7"), ("bar", "3000.7"),
        ("bar", "4000.7"), ("bar", "5000.7")]
    assert asked == [None, "2000.7", "4000.7"]
    assert isinstance(got[0].data, StreamStatus) and got[0].data.signals.coverage_24h == 1.0
    assert isinstance(got[3].data, SchemeEvent) and got[3].data.price == 10.0
    assert got[1].data == {"ts_ms": 1000, "close": 5.0} and isinstance(got[1].data["close"], float)
    assert feed.reconnects == 2


def test_a_refusal_at_connect_raises_its_error_and_a_502_is_retried():
    refusal = {"error": {"code": "payment_required", "message": "subscribe first",
                         "details": {"reason": "not_subscribed", "pair": "binance/BTC/USDT"}, "request_id": "r"}}
    down = {"error": {"code": "temporarily_unavailable", "message": "down", "details": {}, "request_id": "d"}}
    handler, asked = feed_answers(httpx.Response(502, json=down), httpx.Response(402, json=refusal))
    client = Client(KEY, "http://api.test", transport=httpx.MockTransport(handler))
    with pytest.raises(PaymentRequired) as raised:
        next(iter(client.live("binance/BTC/USDT", backoff=(0.001, 0.002))))
    assert raised.value.details["reason"] == "not_subscribed" and len(asked) == 2


def test_a_slow_consumer_error_reconnects_from_the_id_the_server_gives():
    handler, asked = feed_answers(
        Dropped(bar(1) + 'event: error\ndata: {"code": "slow_consumer", "last_event_id": "1000.0"}\n\n', then=None),
        Dropped(bar(2), then=None))
    client = Client(KEY, "http://api.test", transport=httpx.MockTransport(handler))
    feed = client.live("binance/BTC/USDT", backoff=(0.001, 0.002))
    assert [next(feed).id, next(feed).id] == ["1000.0", "2000.0"]
    assert asked == [None, "1000.0"]
    feed.close()


def test_give_up_after_raises_the_connection_error():
    def handler(request):
        raise httpx.ConnectError("refused")

    client = Client(KEY, "http://api.test", transport=httpx.MockTransport(handler))
    with pytest.raises(httpx.ConnectError):
        next(client.live("binance/BTC/USDT", backoff=(0.001, 0.002), give_up_after=0.01))


def test_the_async_feed_resumes_alike():
    handler, asked = feed_answers(Dropped(bar(1) + bar(2)), Dropped(bar(2) + bar(3), then=None),
                                  Dropped("event: stream-closed\ndata: {\"reason\": \"key_revoked\"}\n\n", then=None))

    async def main():
        got = []
        async with AsyncClient(KEY, "http://api.test", transport=httpx.MockTransport(handler)) as client:
            with pytest.raises(StreamClosed):
                async for event in client.live("binance/BTC/USDT", last_event_id="0.0", backoff=(0.001, 0.002)):
                    got.append(event.id)
        return got

    assert asyncio.run(main()) == ["1000.0", "2000.0", "3000.0"]
    assert asked == ["0.0", "2000.0", "3000.0"]
