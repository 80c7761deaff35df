"""A local stand-in for Binance and Coinbase that replays REAL recorded frames
(data/realdata) in each exchange's own protocol, time-shifted to now, over WebSocket and
REST on 127.0.0.1. Tests point the live adapter at it through the configurable URLs.

    with ReplayingExchange.binance({"BTCUSDT": path}) as venue:
        venue.ws_url, venue.rest_url
        venue.drop_connections(); venue.inject_gap("BTCUSDT"); venue.silence(5)

`LoopingBinanceExchange` (below) is the same server serving N symbols from the two Binance
recordings in a loop, for the scale benchmark (bench/bench_scale.py); run alone it is
`python -m tests.venues.server --symbols N --port P`. Its rules are in its docstring; the
rules here are ReplayingExchange's.

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
import os
import re
import struct
import sys
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
    kind: str  # depth | trade | ticker | disconnect (Binance); l2update | match | ticker (Coinbase)
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


def _binance_frames(path: Path):
    """(recv ns, kind, data) of a raw Binance recording: kind is snapshot (the REST depth
    answer), depth, trade or ticker."""
    with gzip.open(path, "rt") as fh:
        for line in fh:
            recv, _, text = line.partition(" ")
            message = orjson.loads(text)
            if "lastUpdateId" in message:
                yield int(recv), "snapshot", message
                continue
            stream, data = message["stream"], message["data"]
            yield int(recv), "depth" if "@depth" in stream else "trade" if "@trade" in stream else "ticker", data


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
        self.requests: list[tuple[str, set[str]]] = []  # the clients' SUBSCRIBE / UNSUBSCRIBE, in order
        self._clients: dict[web.WebSocketResponse, set[str]] = {}
        self._gap: set[str] = set()
        self._silent_until = 0.0
        self._stopped = False
        self.finished = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=f"fake-{venue}")
        self.offset_ms = 0
        self.host, self.port = "127.0.0.1", 0

    # -- construction from recordings ---------------------------------------------------------
    @classmethod
    def binance(cls, recordings: dict[str, Path], **options) -> ReplayingExchange:
        frames, books = [], {}
        for symbol, path in recordings.items():
            for recv, kind, data in _binance_frames(path):
                if kind == "snapshot":
                    books[symbol] = _Book(data["bids"], data["asks"], data["lastUpdateId"])
                else:
                    frames.append((recv, symbol, kind, data))
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
            app.router.add_get("/api/v3/exchangeInfo", self._binance_exchange_info)
            app.router.add_get("/stats", self._stats)
        else:
            app.router.add_get("/", self._coinbase_ws)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.ws_url = f"ws://{self.host}:{port}"
        self.rest_url = f"http://{self.host}:{port}"
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
                self._disconnected(ws)
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
        async for message in ws:
            request_ = _binance_request(message)
            if request_ is None or ws not in self._clients:
                continue
            method, streams, request_id = request_
            self.requests.append((method, streams))
            if method == "SUBSCRIBE":
                self._clients[ws] |= streams
            elif method == "UNSUBSCRIBE":
                self._clients[ws] -= streams
                self._log_ended(streams)
            await ws.send_str(orjson.dumps({"result": None, "id": request_id}).decode())
        self._disconnected(ws)  # the client closed it (a dropped one was logged when dropped)
        return ws

    def _disconnected(self, ws) -> None:
        """Forget a client; in the log, the moment its connection ended for the symbols it
        read (an exact client holds no book across a lost connection)."""
        streams = self._clients.pop(ws, None)
        if self.venue == "binance" and streams:
            self._log_ended(streams)

    def _log_ended(self, streams) -> None:
        """In the log, the moment a client stopped reading these streams (a dropped connection,
        an UNSUBSCRIBE): an exact client holds no book across it."""
        for symbol in sorted({stream.split("@", 1)[0].upper() for stream in streams if "@" in stream}):
            self.log.append(Sent(symbol, "disconnect", {}, int(time.time() * 1000), False))

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

    async def _binance_exchange_info(self, request: web.Request) -> web.Response:
        """GET /api/v3/exchangeInfo, Binance's documented answer for the served symbols (what
        `manage.py catalog_sync` reads)."""
        return web.json_response({"timezone": "UTC", "serverTime": int(time.time() * 1000), "rateLimits": [],
                                  "exchangeFilters": [], "symbols": self.symbol_infos()})

    def symbol_infos(self) -> list[dict]:
        return [_symbol_info(symbol, symbol, symbol[:-4], "USDT") for symbol in self.books if symbol.endswith("USDT")]

    async def _stats(self, request: web.Request) -> web.Response:
        sent = sum(1 for frame in self.log if frame.delivered)
        return web.json_response({"messages": sent, "clients": self.clients, "depth_requests": len(self.served)})

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


EXCHANGE_INFO = ROOT / "tests" / "market" / "fixtures" / "binance_exchange_info.json"


def _binance_request(message) -> tuple[str, set[str], object] | None:
    """A client's live subscription request ({"method": "SUBSCRIBE" | "UNSUBSCRIBE", "params":
    [streams], "id": n}, Binance's documented control messages) as (method, streams, id)."""
    if message.type != WSMsgType.TEXT:
        return None
    try:
        request = orjson.loads(message.data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(request, dict):
        return None
    return str(request.get("method", "")), set(request.get("params") or ()), request.get("id")


def _symbol_info(template: str, symbol: str, base: str, quote: str) -> dict:
    """Binance's exchangeInfo entry of `template` (tick, step, filters) under another name."""
    entries = {entry["symbol"]: entry for entry in orjson.loads(EXCHANGE_INFO.read_bytes())["symbols"]}
    return {**entries[template], "symbol": symbol, "baseAsset": base, "quoteAsset": quote, "status": "TRADING"}


# -- many symbols, looped: the scale benchmark's load generator ----------------------------------

def _ws_frame(payload: bytes) -> bytes:
    """One unmasked, uncompressed WebSocket text frame (RFC 6455 5.2), as a server sends it."""
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 65536:
        return struct.pack("!BBH", 0x81, 126, size) + payload
    return struct.pack("!BBQ", 0x81, 127, size) + payload


_SLOT = re.compile(rb'"\\u0001([a-z])(\d+)\\u0001"|\\u0002([a-z])\\u0002')
TIME, UPDATE_ID, TRADE_ID, LOWER, UPPER = "e", "u", "t", "l", "s"


def _number(kind: str, value: int) -> str:
    return f"\x01{kind}{value}\x01"


def _template(stream_suffix: str, data: dict) -> tuple[tuple[bytes, ...], tuple[tuple[str, int | None], ...]]:
    """A message pre-encoded once: literal bytes around the slots a symbol and a pass fill in
    (the symbol's name, exchange times, update ids, trade ids)."""
    data = dict(data)
    for name in ("E", "T"):
        if name in data:
            data[name] = _number(TIME, data[name])
    for name in ("U", "u"):
        if name in data:
            data[name] = _number(UPDATE_ID, data[name])
    if "t" in data:
        data["t"] = _number(TRADE_ID, data["t"])
    data["s"] = f"\x02{UPPER}\x02"
    text = orjson.dumps({"stream": f"\x02{LOWER}\x02@{stream_suffix}", "data": data})
    literals, slots, at = [], [], 0
    for match in _SLOT.finditer(text):
        literals.append(text[at:match.start()])
        slots.append((match.group(1).decode(), int(match.group(2))) if match.group(1) else
                     (match.group(3).decode(), None))
        at = match.end()
    literals.append(text[at:])
    return tuple(literals), tuple(slots)


def _fill(template, values: dict) -> bytes:
    literals, slots = template
    parts = [literals[0]]
    for (kind, original), literal in zip(slots, literals[1:]):
        parts.append(values[kind] if original is None else b"%d" % (original + values[kind]))
        parts.append(literal)
    return b"".join(parts)


STREAM_SUFFIX = {"depth": "depth@100ms", "trade": "trade", "ticker": "bookTicker"}
CHECKPOINT_FRAMES = 500  # a copy of the book every this many frames, for REST depth answers


class _LoopedRecording:
    """One Binance recording prepared to be played in a loop under many names (see
    LoopingBinanceExchange for the rules)."""

    def __init__(self, path: Path, template_symbol: str, limit_s: float | None = None):
        self.template_symbol = template_symbol
        frames = list(_binance_frames(path))
        snapshot = next(data for _, kind, data in frames if kind == "snapshot")
        self.first_id = snapshot["lastUpdateId"]
        # the loop starts at the diff that continues the snapshot; what came before it is older
        start = next(i for i, (_, kind, data) in enumerate(frames) if kind == "depth" and data["u"] > self.first_id)
        frames = [frame for frame in frames[start:] if frame[1] != "snapshot"]
        frames[0] = (frames[0][0], "depth", {**frames[0][2], "U": self.first_id + 1})
        if limit_s is not None:  # a shorter pass (tests of the loop)
            frames = [frame for frame in frames if frame[0] - frames[0][0] <= limit_s * 1e9]
        recv0, self.first_time = frames[0][0], frames[0][2]["E"]
        self.times_ns = [recv - recv0 for recv, _, _ in frames]
        self.kinds = [kind for _, kind, _ in frames]
        self.templates = [_template(STREAM_SUFFIX[kind], data) for _, kind, data in frames]
        diffs = [data for _, kind, data in frames if kind == "depth"]
        trades = [data["t"] for _, kind, data in frames if kind == "trade"]
        last_time = max(data.get("E", 0) for _, _, data in frames)
        # the next pass begins one typical frame spacing after this one's last frame
        self.period_ms = max(self.times_ns[-1] // 10**6, last_time - self.first_time) + 100
        self.last_id = diffs[-1]["u"]
        self.id_step = self.last_id + 1 - self.first_id  # a pass's update ids continue the last pass's
        self.trade_step = trades[-1] - trades[0] + 1 if trades else 0
        # the book at every CHECKPOINT_FRAMES-th position, and the last id applied there
        bids = {p: q for p, q in snapshot["bids"] if float(q)}
        asks = {p: q for p, q in snapshot["asks"] if float(q)}
        self.snapshot_book = (dict(bids), dict(asks))
        self.checkpoints, last_u = [], self.first_id
        self.last_ids = []  # the last update id applied before each position
        for index, (_, kind, data) in enumerate(frames):
            if index % CHECKPOINT_FRAMES == 0:
                self.checkpoints.append((dict(bids), dict(asks)))
            self.last_ids.append(last_u)
            if kind == "depth":
                self._apply(bids, asks, data)
                last_u = data["u"]
        self.last_ids.append(last_u)
        self.frames_data = [data if kind == "depth" else None for _, kind, data in frames]
        # the pass boundary: one diff from the book at the end to the snapshot's book
        bridge_bids = {p: "0.00000000" for p in bids if p not in self.snapshot_book[0]}
        bridge_bids.update({p: q for p, q in self.snapshot_book[0].items() if bids.get(p) != q})
        bridge_asks = {p: "0.00000000" for p in asks if p not in self.snapshot_book[1]}
        bridge_asks.update({p: q for p, q in self.snapshot_book[1].items() if asks.get(p) != q})
        self.bridge = _template(STREAM_SUFFIX["depth"], {
            "e": "depthUpdate", "E": self.first_time, "s": "", "U": self.first_id, "u": self.first_id,
            "b": [[p, q] for p, q in bridge_bids.items()], "a": [[p, q] for p, q in bridge_asks.items()]})

    @staticmethod
    def _apply(bids: dict, asks: dict, diff: dict) -> None:
        for side, levels in ((bids, diff["b"]), (asks, diff["a"])):
            for price, qty in levels:
                if float(qty):
                    side[price] = qty
                else:
                    side.pop(price, None)

    def book_at(self, position: int, limit: int) -> tuple[int, list, list]:
        """(last update id, bids, asks) once the frames before `position` are applied."""
        bids, asks = (dict(side) for side in self.checkpoints[position // CHECKPOINT_FRAMES])
        for index in range(position - position % CHECKPOINT_FRAMES, position):
            if self.frames_data[index] is not None:
                self._apply(bids, asks, self.frames_data[index])
        top_bids = sorted(bids.items(), key=lambda level: -float(level[0]))[:limit]
        top_asks = sorted(asks.items(), key=lambda level: float(level[0]))[:limit]
        return self.last_ids[position], [list(level) for level in top_bids], [list(level) for level in top_asks]


class _LoopedSymbol:
    """Where one served symbol stands in its recording: the pass, the next frame, and the
    values that pass writes into the templates."""

    def __init__(self, name: str, recording: _LoopedRecording, phase_s: int, started_ns: int, started_ms: int):
        self.name, self.recording, self.phase_s = name, recording, phase_s
        self.started_ns, self.started_ms = started_ns, started_ms
        self.subscribers: list[tuple[object, frozenset]] = []  # (transport, kinds)
        self.sent = 0
        self.passes = 0
        self.position = 0  # next frame of the pass; -1: the pass's bridge is due first
        self._enter(0)
        times = recording.times_ns
        while self.position < len(times) and times[self.position] < phase_s * 10**9:
            self.position += 1  # the first pass starts at the symbol's phase

    def _enter(self, index: int) -> None:
        recording = self.recording
        shift_ms = index * recording.period_ms - self.phase_s * 1000
        self.pass_index = index
        self.pass_start_ns = self.started_ns + shift_ms * 10**6
        self.values = {TIME: self.started_ms - recording.first_time + shift_ms,
                       UPDATE_ID: index * recording.id_step, TRADE_ID: index * recording.trade_step,
                       LOWER: self.name.lower().encode(), UPPER: self.name.encode()}
        self.position = -1 if index else 0

    def due_ns(self) -> int:
        if self.position < 0:
            return self.pass_start_ns
        times = self.recording.times_ns
        if self.position >= len(times):
            return self.pass_start_ns + self.recording.period_ms * 10**6
        return self.pass_start_ns + times[self.position]

    def take(self) -> tuple[str, object] | None:
        """The due frame (kind, template), moving on; None at a pass's end (the next begins)."""
        recording = self.recording
        if self.position < 0:
            self.position = 0
            return "depth", recording.bridge
        if self.position >= len(recording.times_ns):
            self._enter(self.pass_index + 1)
            self.passes += 1
            return None
        index = self.position
        self.position += 1
        return recording.kinds[index], recording.templates[index]

    def book(self, limit: int) -> dict:
        last_id, bids, asks = self.recording.book_at(max(self.position, 0), limit)
        return {"lastUpdateId": last_id + self.values[UPDATE_ID], "bids": bids, "asks": asks}


class LoopingBinanceExchange(ReplayingExchange):
    """N Binance symbols from the two recordings, looped so a run lasts as long as wanted.

        with LoopingBinanceExchange(symbols=100) as venue:   # S001USDT .. S100USDT
            venue.ws_url, venue.rest_url, venue.stats()

    or as a process of its own (its CPU is then the load generator's alone):

        python -m tests.venues.server --symbols 100 --port 9100

    Rules:
    * Symbol i (S001USDT, S002USDT, ...) replays the BTCUSDT recording when i is odd and
      the ETHUSDT one when even, in Binance's protocol (combined streams <s>@depth@100ms,
      <s>@trade, <s>@bookTicker; REST /api/v3/depth and /api/v3/exchangeInfo, the filters
      of the recorded symbol).
    * Phases: the symbols of one recording start spread evenly over its pass (symbol k of
      n starts k/n of the way in, whole seconds), so the pairs do not spike or wrap in step.
    * A pass is the recording from the diff that continues its snapshot to its end; passes
      follow each other every `period_s` (the recording's length plus 100 ms, ~346 s).
      Exchange times (E, T) are the send times: shifted so the first diff's E is the moment
      the pass began, and by `period_s` more each pass; they always increase.
    * The pass boundary keeps the book consistent without a gap: the new pass opens with one
      diff (U = u = the previous pass's last u + 1) that turns the book at the recording's
      end back into its snapshot; the recording's diffs follow, their ids shifted to continue
      from it. Trade ids continue the same way. A client that keeps its book never resyncs
      and misses no trade id: a resync or a missed trade seen by a client is its own fault.
      (Prices jump back to the recording's start at the boundary, as after a fast move.)
    * REST depth answers the book as it stands after the last frame sent, computed from a
      checkpoint of the recording (every 500 frames) plus the diffs since.
    * Frames are pre-encoded once per recording (literal bytes around the symbol name, time
      and id slots) and written as raw WebSocket frames, all of a connection's frames of a
      10 ms tick in one write. `stats()` (and GET /stats) counts the messages sent and how
      late the most late frame left (`behind_ms_max`, since the last stats(reset=True)): a
      generator that cannot keep pace shows it there.
    * Nothing is logged per frame (unlike ReplayingExchange's `log`): there is no reference
      of the looped bars, only their count and timing.
    """

    TICK_S = 0.01

    def __init__(self, *, symbols: int, recordings: tuple[Path, ...] = (BINANCE_BTC, BINANCE_ETH),
                 templates: tuple[str, ...] = ("BTCUSDT", "ETHUSDT"), host: str = "127.0.0.1", port: int = 0,
                 limit_s: float | None = None):
        super().__init__("binance", [], {})
        self.host, self.port = host, port
        self.recordings = [_LoopedRecording(path, template, limit_s) for path, template in zip(recordings, templates)]
        width = max(3, len(str(symbols)))
        self.names = [f"S{i:0{width}d}USDT" for i in range(1, symbols + 1)]
        self._count = symbols
        self.symbols: dict[str, _LoopedSymbol] = {}
        self._by_stream: dict[str, tuple[_LoopedSymbol, str]] = {}
        self._counters = {"messages": 0, "bytes": 0, "depth_requests": 0, "late_frames_100ms": 0,
                          "connections": 0, "subscriptions": 0}
        self._behind_ns_max = 0

    async def _start(self) -> None:
        started_ns, started_ms = time.monotonic_ns(), int(time.time() * 1000)
        per_recording = [list(range(r, self._count, len(self.recordings))) for r in range(len(self.recordings))]
        for r, indexes in enumerate(per_recording):
            recording = self.recordings[r]
            for k, i in enumerate(indexes):
                phase_s = k * recording.period_ms // 1000 // len(indexes)
                symbol = _LoopedSymbol(self.names[i], recording, phase_s, started_ns, started_ms)
                self.symbols[symbol.name] = symbol
                for kind, suffix in STREAM_SUFFIX.items():
                    self._by_stream[f"{symbol.name.lower()}@{suffix}"] = (symbol, kind)
        self.symbols = dict(sorted(self.symbols.items()))
        await super()._start()

    def symbol_infos(self) -> list[dict]:
        return [_symbol_info(symbol.recording.template_symbol, name, name[:-4], "USDT")
                for name, symbol in self.symbols.items()]

    @property
    def period_s(self) -> float:
        return max(recording.period_ms for recording in self.recordings) / 1000

    def stats(self, reset: bool = False) -> dict:
        out = {**self._counters, "clients": len(self._clients), "behind_ms_max": self._behind_ns_max / 1e6,
               "passes": sum(symbol.passes for symbol in self.symbols.values())}
        if reset:
            self._behind_ns_max = 0
        return out

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats(reset=request.query.get("reset") == "1"))

    async def _timeline(self) -> None:
        symbols = list(self.symbols.values())
        counters = self._counters
        while True:
            now = time.monotonic_ns()
            writes: dict[object, list[bytes]] = {}
            for symbol in symbols:
                due = symbol.due_ns()
                if due > now:
                    continue
                behind = now - due
                if behind > self._behind_ns_max:
                    self._behind_ns_max = behind
                while due <= now:
                    taken = symbol.take()
                    if taken is not None and symbol.subscribers:
                        kind, template = taken
                        frame = None
                        for transport, kinds in symbol.subscribers:
                            if kind in kinds:
                                if frame is None:
                                    frame = _ws_frame(_fill(template, symbol.values))
                                writes.setdefault(transport, []).append(frame)
                                counters["messages"] += 1
                                counters["bytes"] += len(frame)
                                if now - due > 100_000_000:
                                    counters["late_frames_100ms"] += 1
                    due = symbol.due_ns()
            for transport, frames in writes.items():
                if not transport.is_closing():
                    transport.write(b"".join(frames))
            elapsed = (time.monotonic_ns() - now) / 1e9
            await asyncio.sleep(max(0.0, self.TICK_S - elapsed))

    async def _binance_ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True, compress=False)  # frames are written raw, uncompressed
        await ws.prepare(request)
        transport = request.transport
        streams: set[str] = set()
        entries: dict[_LoopedSymbol, tuple] = {}  # symbol -> its entry in symbol.subscribers

        def follow(changed: set[str], subscribe: bool) -> None:
            touched = {self._by_stream[stream][0] for stream in changed if stream in self._by_stream}
            if subscribe:
                streams.update(changed)
            else:
                streams.difference_update(changed)
            for symbol in touched:
                if symbol in entries:
                    symbol.subscribers.remove(entries.pop(symbol))
                kinds = frozenset(self._by_stream[s][1] for s in streams if s in self._by_stream
                                  and self._by_stream[s][0] is symbol)
                if kinds:
                    entries[symbol] = (transport, kinds)
                    symbol.subscribers.append(entries[symbol])

        follow(set(request.query.get("streams", "").split("/")), True)
        self._clients[ws] = set()
        self._counters["connections"] += 1
        try:
            async for message in ws:
                request_ = _binance_request(message)
                if request_ is None:
                    continue
                method, changed, request_id = request_
                if method in ("SUBSCRIBE", "UNSUBSCRIBE"):
                    follow(changed, method == "SUBSCRIBE")
                    self._counters["subscriptions"] += 1
                await ws.send_str(orjson.dumps({"result": None, "id": request_id}).decode())
        finally:
            for symbol, entry in entries.items():
                symbol.subscribers.remove(entry)
            self._clients.pop(ws, None)
        return ws

    async def _binance_depth(self, request: web.Request) -> web.Response:
        symbol = self.symbols.get(request.query.get("symbol", ""))
        if symbol is None:
            return web.json_response({"code": -1121, "msg": "Invalid symbol."}, status=400)
        self._counters["depth_requests"] += 1
        limit = min(int(request.query.get("limit", "100")), 5000)
        return web.Response(body=orjson.dumps(symbol.book(limit)), content_type="application/json")

    def drop_connections(self) -> None:
        async def drop():
            for ws in list(self._clients):
                await ws.close(code=1011, message=b"dropped")
        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(10)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import signal

    parser = argparse.ArgumentParser(description="Serve N Binance symbols replayed in a loop from the recordings "
                                                 "(LoopingBinanceExchange), until SIGTERM or Ctrl-C.")
    parser.add_argument("--symbols", type=int, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--pass-seconds", type=float, default=None,
                        help="Play only this much of each recording per pass (a shorter loop)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with LoopingBinanceExchange(symbols=args.symbols, host=args.host, port=args.port,
                                limit_s=args.pass_seconds) as venue:
        print(json.dumps({"ws_url": venue.ws_url, "rest_url": venue.rest_url, "symbols": list(venue.symbols),
                          "period_s": venue.period_s, "pid": os.getpid()}), flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
