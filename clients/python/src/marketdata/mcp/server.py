"""The MCP server: one tool per thing an agent does with the API, each calling it through
`marketdata.AsyncClient` (so every call is metered like any client's; nothing here reads
the service's database).

Configuration, from the environment:
- `MARKETDATA_API_KEY` (required at the first tool call): the account's `mdp_live_...` key;
- `MARKETDATA_BASE_URL` (default http://127.0.0.1:8000): the service's root;
- `MARKETDATA_WIRE_FORMAT` (default `toon`): what the client asks the API for. The answers
  are the same either way; TOON bodies are smaller, so they use less of the byte quota;
- `MARKETDATA_MCP_LOG_LEVEL` (default WARNING): the server's log on stderr.

A tool answers with the API's document in TOON (default) or JSON (`format="json"`); a
refusal of the API is a tool error carrying the envelope's status, code, message and
details."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from datetime import date, datetime, timezone
from typing import Annotated, Any, Literal

import toon_format
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..client import DEFAULT_BASE_URL, AsyncClient
from ..errors import ApiError, MarketDataError, QuotaExceeded
from ..models import LatestBar, Series, Usage

OutputFormat = Literal["toon", "json"]
METRICS = ("trade", "book", "quote")

# -- argument types, with the descriptions a model reads in the tools' input schemas ------------

FormatArg = Annotated[OutputFormat, Field(
    description="Answer format: 'toon' (default; compact tabular text, fewest tokens) or 'json'. "
                "The data are the same in both.")]
PairArg = Annotated[str, Field(
    description="A stream pair as 'exchange/BASE/QUOTE', e.g. 'binance/BTC/USDT' (not the series' 'BTC-USDT').")]
ExchangeArg = Annotated[str, Field(description="Exchange id, e.g. 'binance', 'coinbase', 'kraken'.")]
SymbolArg = Annotated[str, Field(description="Pair symbol 'BASE-QUOTE', e.g. 'BTC-USDT'.")]
StartArg = Annotated[str, Field(description="First UTC day, 'YYYY-MM-DD' (included).")]
EndArg = Annotated[str, Field(description="Last UTC day, 'YYYY-MM-DD' (included).")]
ResolutionArg = Annotated[Literal["daily", "hourly"] | None, Field(
    description="'daily' (default; a range of at most 3,660 days) or 'hourly' (at most 92 days).")]
TimeArg = Annotated[int | str | None, Field(
    description="UTC epoch milliseconds (int) or an ISO 8601 time ('2026-11-27T12:00:00Z'; no zone means UTC).")]

QUOTA_NOTE = "Counts against the monthly quota: 1 request plus the bytes of the API's answer."
SERIES_NOTE = (
    "Historical series (needs the plan's `api` feature). One row per period that has data; `date` is the UTC "
    "day (daily) or hour (hourly). Prices are in the quote currency, amounts/volumes in the base asset, "
    "notionals in the quote currency; derived figures at 10 significant digits. An exchange or symbol the "
    "API does not serve is a 400 invalid_parameter naming it (find pairs with list_pairs / top_tokens). "
    + QUOTA_NOTE)


def _tool_error(error: Exception) -> ToolError:
    """A tool error a model can act on: the API's envelope, or the client's reason."""
    if isinstance(error, ApiError):
        lines = [f"API error {error.status} {error.code}: {error.message}"]
        if error.details:
            lines.append("details: " + json.dumps(error.details, default=str))
        if isinstance(error, QuotaExceeded):
            lines.append(f"retry_after_seconds: {error.retry_after}; resets_at: {error.details.get('resets_at')}")
        if error.request_id:
            lines.append(f"request_id: {error.request_id}")
        return ToolError("\n".join(lines))
    return ToolError(f"{type(error).__name__}: {error}")


def _plain(value: Any) -> Any:
    """A result as plain data, without the client's per-call extras (quota, request id)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("quota", "request_id")}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def document_of(result: Any) -> Any:
    """The document of a client result, in the API's own shape where the client reshaped it."""
    if isinstance(result, Series):
        return {"meta": _plain(result.meta), "data": _plain(result.rows)}
    if isinstance(result, Usage):
        return {"period": {"start": result.period_start, "end": result.period_end}, "plan": result.plan,
                "requests": _plain(result.requests), "bytes": _plain(result.bytes),
                "streams": {"pairs": result.stream_pairs},
                "by_key_and_endpoint": _plain(result.by_key_and_endpoint)}
    if isinstance(result, LatestBar):
        return {"bar": _plain(result.bar)}
    return _plain(result)


def render(document: Any, format: OutputFormat) -> str:
    if format == "json":
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str)
    if format == "toon":
        return toon_format.encode(document)
    raise ToolError(f"format must be 'toon' or 'json', not {format!r}")


def epoch_ms(value: int | str | None, name: str) -> int | None:
    """Epoch milliseconds from an int, a string of digits or an ISO 8601 time (UTC if no zone)."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ToolError(f"{name}: {value!r} is neither epoch milliseconds nor an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


class _Api:
    """The one AsyncClient of the server, made at the first call (so a missing key is a
    tool error the model can report, not a server that fails to start)."""

    def __init__(self, client: AsyncClient | None = None):
        self._client = client

    def get(self) -> AsyncClient:
        if self._client is None:
            if not os.environ.get("MARKETDATA_API_KEY"):
                raise ToolError("no API key: set MARKETDATA_API_KEY in the MCP server's environment")
            wire = os.environ.get("MARKETDATA_WIRE_FORMAT", "toon")
            self._client = AsyncClient(format=wire if wire in ("json", "toon") else "toon")
        return self._client

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self.get(), method)(*args, **kwargs)
        except ToolError:
            raise
        except (MarketDataError, ValueError) as error:
            raise _tool_error(error) from error


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)


def build_server(client: AsyncClient | None = None) -> MCPServer:
    """The MCP server with every tool; `client` replaces the one made from the environment."""
    api = _Api(client)
    server = MCPServer(
        "marketdata",
        title="Market Data API",
        instructions=(
            "Crypto market data: historical series (candlestick, trades, spread, limit-orders), the stream "
            "catalog, snapshots and the latest live bar of subscribed pairs, detected spoofing schemes, and the "
            "account's usage. Start with list_pairs or top_tokens to find pairs. Series take exchange + symbol "
            "'BASE-QUOTE'; stream tools take a pair 'exchange/BASE/QUOTE'. Every call but usage counts against "
            "the monthly quota (1 request + answer bytes). subscribe / unsubscribe change billing and need "
            "confirm=true. Answers are TOON by default (format='json' for JSON)."),
        version="0.1.0",
        log_level=os.environ.get("MARKETDATA_MCP_LOG_LEVEL", "WARNING").upper(),  # type: ignore[arg-type]
    )

    def tool(name: str, description: str, annotations: ToolAnnotations = READ_ONLY):
        return server.tool(name=name, description=description, annotations=annotations, structured_output=False)

    # -- finding pairs --------------------------------------------------------------------------

    @tool("list_pairs", "The stream catalog (GET /api/v1/streams): every pair that can be streamed, as "
          "exchange, base, quote, symbol ('BASE-QUOTE', for the series tools), `subscribed` (whether this "
          "account streams it) and `metrics` (what it subscribes: trade, book, quote). Filters are applied to "
          "the catalog here, after the one API call. " + QUOTA_NOTE)
    async def list_pairs(
            exchange: Annotated[str | None, Field(description="Keep only this exchange's pairs.")] = None,
            subscribed: Annotated[bool | None, Field(
                description="true: only the pairs this account streams; false: only the others.")] = None,
            format: FormatArg = "toon") -> str:
        pairs = (await api.call("pairs")).pairs
        kept = [p for p in pairs if (exchange is None or p.exchange.lower() == exchange.lower())
                and (subscribed is None or p.subscribed == subscribed)]
        return render({"pairs": _plain(kept)}, format)

    @tool("top_tokens", "Pair discovery by market-cap rank (GET /api/v1/rank/top): the top `n` tokens by "
          "market cap (USD) that trade on the exchange, each with rank, symbol, name, market_cap_usd, "
          "circulating_supply (in the token's units) and its tradable `pairs` ('BASE-QUOTE'). " + QUOTA_NOTE)
    async def top_tokens(exchange: ExchangeArg,
                         n: Annotated[int, Field(ge=1, le=250, description="How many tokens, 1 to 250.")] = 10,
                         format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("top_tokens", exchange, n=n)), format)

    # -- historical series ----------------------------------------------------------------------

    @tool("candlestick", "Candlesticks (POST /api/v1/market/candlestick): per period open, high, low, close "
          "(trade prices in the quote currency), observation_count (trades), price_sum and price_variance "
          "(population variance of trade prices). " + SERIES_NOTE)
    async def candlestick(exchange: ExchangeArg, symbol: SymbolArg, start: StartArg, end: EndArg,
                          resolution: ResolutionArg = None, format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("candlestick", exchange, symbol, start, end,
                                                 resolution=resolution)), format)

    @tool("trades", "Traded volume (POST /api/v1/market/trades): per period volume, buy_volume, sell_volume "
          "(base asset, by taker side), trade_count and vwap (quote currency). " + SERIES_NOTE)
    async def trades(exchange: ExchangeArg, symbol: SymbolArg, start: StartArg, end: EndArg,
                     resolution: ResolutionArg = None, format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("trades", exchange, symbol, start, end, resolution=resolution)),
                      format)

    @tool("spread", "Quoted spread (POST /api/v1/market/spread): per period the closing bid_price, ask_price, "
          "mid_price (quote currency) and spread_bps, and spread_bps_avg / _min / _max over the period's quote "
          "updates (basis points of mid). " + SERIES_NOTE)
    async def spread(exchange: ExchangeArg, symbol: SymbolArg, start: StartArg, end: EndArg,
                     resolution: ResolutionArg = None, format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("spread", exchange, symbol, start, end, resolution=resolution)),
                      format)

    @tool("limit_orders", "Resting order-book depth within 1 % of mid (POST /api/v1/market/limit-orders), "
          "averaged over per-second book samples: bid_amount / ask_amount (base asset), bid_notional / "
          "ask_notional (quote currency), bid_orders / ask_orders (price levels). `side` keeps one side's three "
          "columns (half the bytes). `end` defaults to today. " + SERIES_NOTE)
    async def limit_orders(exchange: ExchangeArg, symbol: SymbolArg, start: StartArg,
                           end: Annotated[str | None, Field(
                               description="Last UTC day 'YYYY-MM-DD' (included); default today.")] = None,
                           side: Annotated[Literal["bid_amount", "ask_amount"] | None, Field(
                               description="Only the bid (bid_amount) or ask (ask_amount) side.")] = None,
                           resolution: ResolutionArg = None, format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("limit_orders", exchange, symbol, start, end, side=side,
                                                 resolution=resolution)), format)

    # -- streams: data of subscribed pairs ------------------------------------------------------

    @tool("snapshot", "Stored bars of a pair this account subscribes to (POST "
          "/api/v1/streams/{exchange}/{base}/{quote}/snapshot); another pair is a 402 payment_required "
          "(subscribe first). Each bar has ts_ms (UTC epoch ms, the bar's start) and the fields of the "
          "requested metrics: trade = open, high, low, close, vwap (quote currency), volume, buy_volume, "
          "sell_volume (base asset), trade_count; book = bid_depth, ask_depth (base asset, within 1 % of mid), "
          "imbalance, circulating_supply; quote = bid_price, ask_price, mid_price (quote currency), spread_bps. "
          "Range caps (to minus from): second <= 24 h, minute <= 7 days, hour <= 30 days, day <= 366 days; "
          "over a cap is a 400. granularity 'day' is for the trade metric only. Default window when from/to are "
          "omitted: the last 1 h (second), 24 h (minute), 7 days (hour), 30 days (day), ending now. A second-"
          "granularity day is 86,400 bars: ask for a short window. " + QUOTA_NOTE)
    async def snapshot(pair: PairArg,
                       metrics: Annotated[list[Literal["trade", "book", "quote"]], Field(
                           min_length=1, description="Which metrics' fields: a non-empty subset of trade, book, "
                                                     "quote.")],
                       granularity: Annotated[Literal["second", "minute", "hour", "day"], Field(
                           description="Bar length: second, minute, hour, or day (trade only).")],
                       from_time: TimeArg = None, to_time: TimeArg = None, format: FormatArg = "toon") -> str:
        result = await api.call("snapshot", pair, metrics, granularity, from_ms=epoch_ms(from_time, "from_time"),
                                to_ms=epoch_ms(to_time, "to_time"))
        return render(document_of(result), format)

    @tool("live_bar", "The latest published 1-second bar of a pair this account subscribes to (GET "
          "/api/v1/streams/{exchange}/{base}/{quote}/live): ts_ms (UTC epoch ms) and the fields of every "
          "subscribed metric (as in snapshot), or bar null before the first. Another pair is a 402 "
          "payment_required. " + QUOTA_NOTE)
    async def live_bar(pair: PairArg, format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("latest", pair)), format)

    @tool("stream_status", "The state of this account's stream of a subscribed pair (GET "
          "/api/v1/streams/{exchange}/{base}/{quote}/status): REQUESTED, WARMING, READY, STALE or FAILED, "
          "with its signals (coverage_24h 0..1, heartbeat_ms UTC epoch ms, heartbeat_age_ms) and per metric. "
          "After subscribing, poll it until READY. Another pair is a 402 payment_required. " + QUOTA_NOTE)
    async def stream_status(pair: PairArg, format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("status", pair)), format)

    @tool("scheme_events", "Spoofing schemes detected live on a catalog pair (GET "
          "/api/v1/streams/{exchange}/{base}/{quote}/schemes), newest first: each event has id, ts_ms (UTC "
          "epoch ms), scheme (flipping, vacuuming, layering), direction, side, price (quote currency), "
          "confidence, alert_score and the detector's build / collapse metrics; start_ms / end_ms bound the "
          "window. Any catalog pair, subscribed or not. " + QUOTA_NOTE)
    async def scheme_events(pair: PairArg,
                            lookback_hours: Annotated[int, Field(
                                ge=1, le=720, description="Window ending now, 1 to 720 hours.")] = 24,
                            limit: Annotated[int, Field(
                                ge=100, le=50000, description="At most this many events, 100 to 50,000.")] = 100,
                            format: FormatArg = "toon") -> str:
        result = await api.call("schemes", pair, lookback_hours=lookback_hours, limit=limit)
        return render(document_of(result), format)

    # -- the account ----------------------------------------------------------------------------

    @tool("usage", "This UTC month's usage of the account (GET /api/v1/me/usage): plan, requests and bytes "
          "(used, limit, remaining; bytes are the API's answer bodies as sent), the number of streamed pairs, and "
          "one line per key and endpoint. Free: this call does not count against the quota.")
    async def usage(format: FormatArg = "toon") -> str:
        return render(document_of(await api.call("usage")), format)

    # -- subscriptions: billing -----------------------------------------------------------------

    async def billing_context() -> str:
        try:
            account = await api.get().usage()  # not counted against the quota
        except MarketDataError:
            return ""
        return (f" The account is on the '{account.plan}' plan and streams {account.stream_pairs} pair(s) "
                f"this month.")

    @tool("subscribe", "Subscribe this account to a pair's live stream (POST /api/v1/streams). CHANGES "
          "BILLING: a streamed pair is billed at the plan's price per pair-month, pro rata per UTC day on which it "
          "is subscribed at any moment (today included); a pair already subscribed costs nothing more, and "
          "metrics never change the price. Refused unless confirm=true: ask the user "
          "first. Returns the subscription (metrics, state, created: true when this call added the pair). Then "
          "poll stream_status until READY. A pair not in the catalog is a 400 invalid_parameter. " + QUOTA_NOTE,
          ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                          open_world_hint=True))
    async def subscribe(pair: PairArg,
                        metrics: Annotated[list[Literal["trade", "book", "quote"]] | None, Field(
                            description="Metrics to stream (default all three); added to any already held, "
                                        "never narrowed.")] = None,
                        confirm: Annotated[bool, Field(
                            description="Must be true to subscribe: this is billed.")] = False,
                        format: FormatArg = "toon") -> str:
        if confirm is not True:
            raise ToolError(f"Not subscribed: subscribing {pair} adds a billed streamed pair to the account "
                            f"(the plan's price per pair-month, pro rata per UTC day subscribed, today included; "
                            f"nothing more if the account already streams it).{await billing_context()} Call "
                            f"again with confirm=true once the user has agreed.")
        return render(document_of(await api.call("subscribe", pair, metrics)), format)

    @tool("unsubscribe", "Unsubscribe this account from a pair's live stream (DELETE "
          "/api/v1/streams/{exchange}/{base}/{quote}), or drop only one `metric`. CHANGES BILLING (a dropped pair "
          "is billed for the UTC days it was subscribed, today included, and no more) and cuts the "
          "pair's live feed, snapshots and live bars for this account (they answer 402 until it is subscribed "
          "again). Refused unless confirm=true: ask the user first. Dropping what is not held is no error. "
          + QUOTA_NOTE,
          ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True))
    async def unsubscribe(pair: PairArg,
                          metric: Annotated[Literal["trade", "book", "quote"] | None, Field(
                              description="Drop only this metric; omitted: drop the whole pair.")] = None,
                          confirm: Annotated[bool, Field(
                              description="Must be true to unsubscribe: this changes billing.")] = False,
                          format: FormatArg = "toon") -> str:
        what = f"the metric {metric} of {pair}" if metric else f"the whole pair {pair}"
        if confirm is not True:
            raise ToolError(f"Not unsubscribed: this would drop {what} from the account's streams (a dropped pair "
                            f"is billed for the UTC days it was subscribed, today included, and no more; a dropped "
                            f"metric changes no price; a dropped pair's live feed, snapshots and live bars "
                            f"answer 402 until subscribed again).{await billing_context()} Call again with "
                            f"confirm=true once the user has agreed.")
        await api.call("unsubscribe", pair, metric)
        return render({"unsubscribed": pair, "metric": metric}, format)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m marketdata.mcp",
        description="MCP server of the Market Data API (key in MARKETDATA_API_KEY, service root in "
                    f"MARKETDATA_BASE_URL, default {DEFAULT_BASE_URL}).")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="streamable-http: port to listen on")
    args = parser.parse_args(argv)
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
