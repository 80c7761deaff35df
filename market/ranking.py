"""Market-cap ranking providers. Plain Python (no Django).

A provider's `fetch()` returns `(as_of, tokens)`: the time the ranking describes (an
aware UTC datetime) and the `RankedToken`s sorted by rank, one per symbol.

* `FileRankingProvider(path)`: a JSON file
  `{"as_of": "2026-11-01T00:00:00Z", "tokens": [{"rank": 1, "symbol": "BTC", "name":
  "Bitcoin", "market_cap_usd": ..., "circulating_supply": ...}, ...]}`
  (the shipped demo file is market/data/rankings.json).
* `CoinGeckoRankingProvider`: CoinGecko's `/coins/markets` endpoint over httpx.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable

import httpx

__all__ = [
    "CoinGeckoRankingProvider",
    "FileRankingProvider",
    "ProviderUnavailable",
    "RankedToken",
    "RankingProviderError",
    "RateLimited",
]


@dataclass(frozen=True, slots=True)
class RankedToken:
    rank: int
    symbol: str  # upper case, e.g. "BTC"
    name: str
    market_cap_usd: float | None
    circulating_supply: float | None


class RankingProviderError(Exception):
    """The provider could not give a ranking (HTTP error other than 429 / 5xx)."""


class RateLimited(RankingProviderError):
    """HTTP 429. `retry_after` is the server's Retry-After in seconds, None if not sent."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ProviderUnavailable(RankingProviderError):
    """The provider is down or unreachable: HTTP 5xx, timeout or transport error."""


def _parse_time(text: str) -> datetime:
    """ISO 8601 ('Z' allowed) -> aware UTC datetime; a naive time is taken as UTC."""
    parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- file ---------------------------------------------------------------------------------


class FileRankingProvider:
    """A ranking kept in a JSON file. `fetch()` reads the file each time and raises
    ValueError naming the file and the offending entry when the content is invalid."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def fetch(self) -> tuple[datetime, list[RankedToken]]:
        where = str(self.path)
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"{where}: not UTF-8 text: {exc}") from exc
        return self.parse(data, where=where)

    @staticmethod
    def parse(data: Any, *, where: str = "ranking") -> tuple[datetime, list[RankedToken]]:
        """Validate an already decoded ranking document."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: the top level must be an object with 'as_of' and 'tokens'")
        as_of_text = data.get("as_of")
        if not isinstance(as_of_text, str):
            raise ValueError(f"{where}: 'as_of' must be an ISO 8601 time string like \"2026-11-01T00:00:00Z\"")
        try:
            as_of = _parse_time(as_of_text)
        except ValueError:
            raise ValueError(f"{where}: 'as_of' is not an ISO 8601 time: {as_of_text!r}") from None
        entries = data.get("tokens")
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"{where}: 'tokens' must be a non-empty list")

        tokens: list[RankedToken] = []
        ranks: dict[int, int] = {}
        symbols: dict[str, int] = {}
        for i, entry in enumerate(entries):
            at = f"{where}: tokens[{i}]"
            if not isinstance(entry, dict):
                raise ValueError(f"{at} must be an object")
            rank = entry.get("rank")
            if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
                raise ValueError(f"{at}.rank must be a positive integer, got {rank!r}")
            symbol = entry.get("symbol")
            if not isinstance(symbol, str) or not symbol.strip():
                raise ValueError(f"{at}.symbol must be a non-empty string, got {symbol!r}")
            symbol = symbol.strip().upper()
            name = entry.get("name", "")
            if not isinstance(name, str):
                raise ValueError(f"{at}.name must be a string, got {name!r}")
            numbers = {}
            for field in ("market_cap_usd", "circulating_supply"):
                value = entry.get(field)
                if value is not None and (not _is_number(value) or value < 0):
                    raise ValueError(f"{at}.{field} must be a non-negative number or null, got {value!r}")
                numbers[field] = None if value is None else float(value)
            if rank in ranks:
                raise ValueError(f"{at}.rank {rank} repeats tokens[{ranks[rank]}]")
            if symbol in symbols:
                raise ValueError(f"{at}.symbol {symbol!r} repeats tokens[{symbols[symbol]}]")
            ranks[rank], symbols[symbol] = i, i
            tokens.append(RankedToken(rank=rank, symbol=symbol, name=name.strip(), **numbers))
        tokens.sort(key=lambda t: t.rank)
        return as_of, tokens


# -- CoinGecko ---------------------------------------------------------------------------


def _retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Retry-After as seconds: either delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - now).total_seconds())


class CoinGeckoRankingProvider:
    """The top `per_page * pages` coins by market cap from CoinGecko's
    `GET {base_url}/coins/markets?vs_currency=usd&order=market_cap_desc&per_page=..&page=..`.

    Maps market_cap_rank, symbol (upper-cased), name, market_cap, circulating_supply.
    Coins without a market_cap_rank are skipped; when several coins share a symbol the
    best ranked one is kept (the catalog has one asset per symbol). `as_of` is the latest
    `last_updated` of the coins, or now when none has one.

    Errors: HTTP 429 -> `RateLimited` (with `retry_after` seconds from Retry-After);
    HTTP 5xx, timeouts and connection errors -> `ProviderUnavailable`; other HTTP errors
    -> `RankingProviderError`; a body that is not the expected JSON list -> ValueError.

    `api_key` is sent as `x-cg-pro-api-key` when `base_url` is the Pro API
    (pro-api.coingecko.com), else as `x-cg-demo-api-key`. Pass `client` (an httpx.Client)
    to control transport and timeouts; it is not closed by the provider. Without one, a
    client with `timeout` seconds is made for each fetch."""

    def __init__(self, base_url: str = "https://api.coingecko.com/api/v3", api_key: str | None = None,
                 per_page: int = 250, pages: int = 1, client: httpx.Client | None = None, *,
                 timeout: float = 15.0, now: Callable[[], datetime] | None = None):
        if not 1 <= per_page <= 250:
            raise ValueError("per_page must be between 1 and 250 (CoinGecko's maximum)")
        if pages < 1:
            raise ValueError("pages must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.per_page = per_page
        self.pages = pages
        self.timeout = timeout
        self._client = client
        self._now = now or (lambda: datetime.now(timezone.utc))

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.api_key:
            header = "x-cg-pro-api-key" if "pro-api." in self.base_url else "x-cg-demo-api-key"
            headers[header] = self.api_key
        return headers

    def fetch(self) -> tuple[datetime, list[RankedToken]]:
        if self._client is not None:
            return self._fetch(self._client)
        with httpx.Client(timeout=self.timeout) as client:
            return self._fetch(client)

    def _fetch(self, client: httpx.Client) -> tuple[datetime, list[RankedToken]]:
        rows: list[dict] = []
        for page in range(1, self.pages + 1):
            batch = self._get_page(client, page)
            rows.extend(batch)
            if len(batch) < self.per_page:
                break
        return self.parse(rows, now=self._now())

    def _get_page(self, client: httpx.Client, page: int) -> list[dict]:
        url = f"{self.base_url}/coins/markets"
        params = {"vs_currency": "usd", "order": "market_cap_desc", "per_page": self.per_page, "page": page}
        try:
            response = client.get(url, params=params, headers=self._headers())
        except httpx.TimeoutException as exc:
            raise ProviderUnavailable(f"CoinGecko timed out: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise ProviderUnavailable(f"CoinGecko unreachable: {exc!r}") from exc
        status = response.status_code
        if status == 429:
            retry_after = _retry_after_seconds(response.headers.get("retry-after"), self._now())
            raise RateLimited(f"CoinGecko rate limit hit (HTTP 429), retry after {retry_after} s", retry_after)
        if status >= 500:
            raise ProviderUnavailable(f"CoinGecko HTTP {status}: {response.text[:200]}")
        if status != 200:
            raise RankingProviderError(f"CoinGecko HTTP {status}: {response.text[:200]}")
        try:
            body = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"CoinGecko page {page}: response is not JSON: {exc}") from exc
        if not isinstance(body, list):
            raise ValueError(f"CoinGecko page {page}: expected a JSON list of coins, got {type(body).__name__}")
        return body

    @staticmethod
    def parse(rows: list[Any], *, now: datetime | None = None) -> tuple[datetime, list[RankedToken]]:
        """Map decoded `/coins/markets` rows to the ranking."""
        best: dict[str, RankedToken] = {}
        latest: datetime | None = None
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"CoinGecko coin #{i}: expected an object, got {type(row).__name__}")
            symbol, name, rank = row.get("symbol"), row.get("name"), row.get("market_cap_rank")
            if not isinstance(symbol, str) or not symbol.strip():
                raise ValueError(f"CoinGecko coin #{i} ({row.get('id')!r}): missing symbol")
            if rank is None:
                continue  # unranked coins cannot be placed
            if not _is_number(rank) or rank < 1 or int(rank) != rank:
                raise ValueError(f"CoinGecko coin #{i} ({row.get('id')!r}): bad market_cap_rank {rank!r}")
            numbers = {}
            for ours, theirs in (("market_cap_usd", "market_cap"), ("circulating_supply", "circulating_supply")):
                value = row.get(theirs)
                if value is not None and not _is_number(value):
                    raise ValueError(f"CoinGecko coin #{i} ({row.get('id')!r}): bad {theirs} {value!r}")
                numbers[ours] = None if value is None else float(value)
            token = RankedToken(rank=int(rank), symbol=symbol.strip().upper(),
                                name=name.strip() if isinstance(name, str) else "", **numbers)
            if token.symbol not in best or token.rank < best[token.symbol].rank:
                best[token.symbol] = token
            updated = row.get("last_updated")
            if isinstance(updated, str) and updated:
                try:
                    when = _parse_time(updated)
                except ValueError:
                    when = None
                if when is not None and (latest is None or when > latest):
                    latest = when
        as_of = latest or now or datetime.now(timezone.utc)
        return as_of, sorted(best.values(), key=lambda t: t.rank)
