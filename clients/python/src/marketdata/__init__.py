"""Python client of the Market Data API.

    from marketdata import Client

    with Client("mdp_live_...", "http://127.0.0.1:8000") as client:
        candles = client.candlestick("binance", "BTC-USDT", "2026-10-01", "2026-10-31")
        print(candles.quota.requests_remaining, candles.to_pandas())
"""

from .client import AsyncClient, Client
from .errors import (ApiError, AuthenticationError, Forbidden, InvalidRequest, MarketDataError, NotFound,
                     PaymentRequired, ProtocolError, QuotaExceeded, ServerError, StreamClosed, Unavailable)
from .models import (Bar, CandlestickRow, UsageCounter, LatestBar, LimitOrdersRow, LiveEvent, MetricStatus, PairList,
                     Quota, RankedToken, Ranking, SchemeEvent, SchemeHistory, Series, SeriesMeta, Snapshot, SpreadRow,
                     StatusSignals, StreamablePair, StreamStatus, StreamToken, Subscription, TradesRow, Unsubscribed,
                     Usage, UsageLine)
from .streaming import AsyncLiveFeed, LiveFeed

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "LiveFeed", "AsyncLiveFeed",
    "MarketDataError", "ApiError", "InvalidRequest", "AuthenticationError", "PaymentRequired", "Forbidden", "NotFound",
    "QuotaExceeded", "ServerError", "Unavailable", "StreamClosed", "ProtocolError",
    "Quota", "Series", "SeriesMeta", "CandlestickRow", "LimitOrdersRow", "TradesRow", "SpreadRow", "PairList",
    "StreamablePair", "Subscription", "Unsubscribed", "StreamStatus", "StatusSignals", "MetricStatus", "Snapshot",
    "Bar", "LatestBar", "StreamToken", "SchemeEvent", "SchemeHistory", "Ranking", "RankedToken", "Usage", "UsageLine",
    "UsageCounter", "LiveEvent",
]
