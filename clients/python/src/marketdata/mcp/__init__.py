"""An MCP (Model Context Protocol) server of the Market Data API, so LLM agents can call it.

    pip install './clients/python[mcp]'
    MARKETDATA_API_KEY=mdp_live_... python -m marketdata.mcp                       # stdio
    MARKETDATA_API_KEY=mdp_live_... python -m marketdata.mcp --transport streamable-http --port 8765

Every tool calls the API through `marketdata.AsyncClient`, over HTTP with the account's
key: each call is metered like any client's (see each tool's description). Answers are
TOON by default (compact text for models), JSON with `format="json"`."""

from .server import build_server, main

__all__ = ["build_server", "main"]
