"""Exchanges' own documented streams, for an exact book (ccxt's unified order book keeps a
truncated view and resyncs often). Plain Python: codecs without I/O, and an asyncio feed
that runs them over aiohttp."""

from .binance import BinanceCodec, binance_recording_events

VENUES = ("binance", "coinbase")

__all__ = ["VENUES", "BinanceCodec", "binance_recording_events"]
