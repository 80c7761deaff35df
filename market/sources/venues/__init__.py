"""Exchanges' own documented streams, for an exact book (ccxt's unified order book keeps a
truncated view and resyncs often). Plain Python: codecs without I/O, and an asyncio feed
that runs them over aiohttp."""

from .binance import BinanceCodec, binance_recording_events
from .coinbase import CoinbaseCodec, coinbase_recording_events
from .feed import FEEDS, FeedStatus, feed_for

VENUES = tuple(FEEDS)

__all__ = ["VENUES", "BinanceCodec", "CoinbaseCodec", "FeedStatus", "binance_recording_events",
           "coinbase_recording_events", "feed_for"]
