"""A local stand-in for Binance and Coinbase that replays REAL recorded frames
(data/realdata) in each exchange's own protocol, time-shifted to now, over WebSocket and
REST on 127.0.0.1. Tests point the live adapter at it through the configurable URLs.

    with ReplayingExchange.binance({"BTCUSDT": path}) as venue:
        venue.ws_url, venue.rest_url
        venue.drop_connections(); venue.inject_gap("BTCUSDT"); venue.silence(5)

Rules:
* One timeline, like the real exchange: replay starts when the server starts, paced by
  the recorded receive times (`speed` 1.0 = real time); a client that connects late
  misses what was sent before. Exchange times (Binance `E`/`T`, Coinbase `time`) are
  shifted by a whole number of seconds so the first frame lands at about now (positions
  inside a second are kept, so are the seconds' contents).
* The server keeps the true book: the recording's snapshot plus every diff of the
  timeline, whether or not a client received it (gaps and silences included). REST depth
  and Coinbase snapshots serve that book as it stands.
* `log` holds every frame in timeline order with whether it reached a client, and every
  snapshot served: the reference (tests/venues/reference.py) is computed from it.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import orjson
from aiohttp import WSMsgType, web

ROOT = Path(__file__).resolve().parents[2]
REALDATA = ROOT / "data" / "realdata"
BINANCE_BTC = REALDATA / "binance-spot" / "btcusdt_20240808.gz"
BINANCE_ETH = REALDATA / "binance-spot" / "ethusdt_20240808.gz"
COINBASE_WS = REALDATA / "coinbase" / "COINBASE.ws.28.0"


@dataclass
class Sent:
    """One frame of the timeline: its key (symbol or product), kind and shifted data."""

    key: str
    kind: str  # depth | trade | ticker (Binance); l2update | match | ticker (Coinbase)
    data: dict
    wall_ms: int
    delivered: bool


@dataclass
class Served:
    key: str
    wall_ms: int
    last_update_id: int | None
    bids: dict = field(repr=False)
    asks: dict = field(repr=False)
    index: int = 0  # frames of the timeline before it


class _Book:
    def __init__(self, bids, asks, last_update_id=None):
        self.bids = {Decimal(p): (p, q) for p, q in bids if Decimal(q) != 0}
        self.asks = {Decimal(p): (p, q) for p, q in asks if Decimal(q) != 0}
        self.last_update_id = last_update_id

    def apply(self, side: dict, price: str, qty: str) -> None:
        if Decimal(qty) == 0:
            side.pop(Decimal(price), None)
        else:
            side[Decimal(price)] = (price, qty)

    def levels(self, limit: int):
        bids = [list(self.bids[p]) for p in sorted(self.bids, reverse=True)[:limit]]
        asks = [list(self.asks[p]) for p in sorted(self.asks)[:limit]]
        return bids, asks


class ReplayingExchange:
    def __init__(self, venue: str, frames: list[tuple[int, str, str, dict]], books: dict[str, _Book], *,
                 speed: float = 1.0, limit_s: float | None = None):
        self.venue = venue
        self.speed = speed
        self._frames = frames  # (recv ns, key, kind, data), time order
        if limit_s is not None:
            cut = frames[0][0] + int(limit_s * 1e9)
            self._frames = [f for f in frames if f[0] <= cut]
        self.books = books
        self.log: list[Sent] = []
        self.served: list[Served] = []
        self._clients: dict[web.WebSocketResponse, set[str]] = {}
        self._gap: set[str] = set()
        self._silent_until = 0.0
        self._stopped = False
        self.finished = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=f"fake-{venue}")
        self.offset_ms = 0

    # -- construction from recordings ---------------------------------------------------------
    @classmethod
    def binance(cls, recordings: dict[str, Path], **options) -> ReplayingExchange:
        frames, books = [], {}
        for symbol, path in recordings.items():
            with gzip.open(path, "rt") as fh:
                for line in fh:
                    recv, _, text = line.partition(" ")
                    message = orjson.loads(text)
                    if "lastUpdateId" in message:
                        books[symbol] = _Book(message["bids"], message["asks"], message["lastUpdateId"])
                        continue
                    stream, data = message["stream"], message["data"]
                    kind = "depth" if "@depth" in stream else "trade" if "@trade" in stream else "ticker"
                    frames.append((int(recv), symbol, kind, data))
        frames.sort(key=lambda f: f[0])
        server = cls("binance", frames, books, **options)
        first = next(f[3]["E"] for f in server._frames if f[2] != "ticker")
        server.offset_ms = ((int(time.time() * 1000) - first) // 1000 + 1) * 1000
        return server

    @classmethod
    def coinbase(cls, products: list[str], path: Path = COINBASE_WS, **options) -> ReplayingExchange:
        frames, books = [], {}
        first_time = None
        with open(path) as fh:
            for line in fh:
                head, brace, rest = line.partition("{")
                if not brace or " <- " in head:
                    continue
                message = orjson.loads(brace + rest)
                product = message.get("product_id")
                if product not in products:
                    continue
                recv = int(float(head.strip().rstrip(":")) * 1e9)
                if message["type"] == "snapshot":
                    books[product] = _Book(message["bids"], message["asks"])
                    continue
                if message["type"] == "l2update" and first_time is None:
                    first_time = message["time"]
                frames.append((recv, product, message["type"], message))
        frames.sort(key=lambda f: f[0])
        server = cls("coinbase", frames, books, **options)
        first = int(datetime.fromisoformat(first_time.replace("Z", "+00:00")).timestamp() * 1000)
        server.offset_ms = ((int(time.time() * 1000) - first) // 1000 + 1) * 1000
        return server

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> ReplayingExchange:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        self._stopped = True
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> None:
        app = web.Application()
        if self.venue == "binance":
            app.router.add_get("/stream", self._binance_ws)
            app.router.add_get("/api/v3/depth", self._binance_depth)
        else:
            app.router.add_get("/", self._coinbase_ws)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.ws_url = f"ws://127.0.0.1:{port}"
        self.rest_url = f"http://127.0.0.1:{port}"
        self._replay = asyncio.ensure_future(self._timeline())

    async def _stop(self) -> None:
        self._replay.cancel()
        for ws in list(self._clients):
            await ws.close()
        await self._runner.cleanup()

    # -- faults (called from the test's thread) -------------------------------------------------
    def drop_connections(self) -> None:
        async def drop():
            for ws in list(self._clients):
                self._clients.pop(ws, None)
                await ws.close(code=1011, message=b"dropped by the test")
        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(10)

    def inject_gap(self, key: str) -> None:
        """The next depth diff (l2update) of `key` reaches nobody; the true book has it."""
        self._gap.add(key)

    def silence(self, seconds: float) -> None:
        self._silent_until = time.monotonic() + seconds

    @property
    def clients(self) -> int:
        return len(self._clients)

    # -- the timeline ---------------------------------------------------------------------------
    def shifted(self, kind: str, data: dict) -> dict:
        data = dict(data)
        if self.venue == "binance":
            for name in ("E", "T"):
                if name in data:
                    data[name] += self.offset_ms
        elif "time" in data:
            moment = datetime.fromisoformat(data["time"].replace("Z", "+00:00"))
            data["time"] = (moment + timedelta(milliseconds=self.offset_ms)).astimezone(timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ")
        return data

    async def _timeline(self) -> None:
        started, first = time.monotonic(), self._frames[0][0]
        for recv, key, kind, raw in self._frames:
            wait = (recv - first) / 1e9 / self.speed - (time.monotonic() - started)
            if wait > 0:
                await asyncio.sleep(wait)
            data = self.shifted(kind, raw)
            is_book = kind in ("depth", "l2update")
            if is_book:
                self._apply(key, data)
            dropped = (is_book and key in self._gap) or time.monotonic() < self._silent_until
            if is_book and key in self._gap:
                self._gap.discard(key)
            delivered = False
            if not dropped:
                delivered = await self._send(key, kind, data)
            self.log.append(Sent(key, kind, data, int(time.time() * 1000), delivered))
        self.finished.set()

    def _apply(self, key: str, data: dict) -> None:
        book = self.books[key]
        if self.venue == "binance":
            if data["u"] <= book.last_update_id:
                return
            for price, qty in data["b"]:
                book.apply(book.bids, price, qty)
            for price, qty in data["a"]:
                book.apply(book.asks, price, qty)
            book.last_update_id = data["u"]
        else:
            for side, price, size in data["changes"]:
                book.apply(book.bids if side == "buy" else book.asks, price, size)

    async def _send(self, key: str, kind: str, data: dict) -> bool:
        if self.venue == "binance":
            stream = f"{key.lower()}@" + {"depth": "depth@100ms", "trade": "trade", "ticker": "bookTicker"}[kind]
            text = orjson.dumps({"stream": stream, "data": data}).decode()
        else:
            stream, text = key, orjson.dumps(data).decode()
        sent = False
        for ws, wanted in list(self._clients.items()):
            if stream in wanted and not ws.closed:
                try:
                    await ws.send_str(text)
                    sent = True
                except (ConnectionError, RuntimeError):
                    self._clients.pop(ws, None)
        return sent

    # -- Binance ----------------------------------------------------------------------------------
    async def _binance_ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._clients[ws] = set(request.query.get("streams", "").split("/"))
        async for _ in ws:  # the client sends nothing we answer
            pass
        self._clients.pop(ws, None)
        return ws

    async def _binance_depth(self, request: web.Request) -> web.Response:
        symbol = request.query.get("symbol", "")
        book = self.books.get(symbol)
        if book is None:
            return web.json_response({"code": -1121, "msg": "Invalid symbol."}, status=400)
        limit = min(int(request.query.get("limit", "100")), 5000)
        bids, asks = book.levels(limit)
        self.served.append(Served(symbol, int(time.time() * 1000), book.last_update_id, dict(book.bids),
                                  dict(book.asks), len(self.log)))
        return web.json_response({"lastUpdateId": book.last_update_id, "bids": bids, "asks": asks})

    # -- Coinbase ---------------------------------------------------------------------------------
    async def _coinbase_ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            ask = orjson.loads(message.data)
            if ask.get("type") != "subscribe":
                continue
            products = ask.get("product_ids", [])
            unknown = [p for p in products if p not in self.books]
            if unknown:
                await ws.send_str(orjson.dumps({"type": "error", "message": "Failed to subscribe",
                                                "reason": f"{unknown[0]} is not a valid product"}).decode())
                continue
            await ws.send_str(orjson.dumps({"type": "subscriptions", "channels": [
                {"name": name, "product_ids": products} for name in ask.get("channels", [])]}).decode())
            for product in products:
                book = self.books[product]
                bids, asks = book.levels(100_000)
                self.served.append(Served(product, int(time.time() * 1000), None, dict(book.bids),
                                          dict(book.asks), len(self.log)))
                await ws.send_str(orjson.dumps({"type": "snapshot", "product_id": product, "bids": bids,
                                                "asks": asks}).decode())
            self._clients[ws] = set(products)
        self._clients.pop(ws, None)
        return ws
