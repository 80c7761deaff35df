"""Ranking providers: the shipped file, bad files, and CoinGecko on recorded responses
through httpx.MockTransport (no network)."""

import json
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from market.ranking import (
    CoinGeckoRankingProvider,
    FileRankingProvider,
    ProviderUnavailable,
    RankedToken,
    RankingProviderError,
    RateLimited,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "market" / "data" / "rankings.json"
PAGE1 = json.loads((Path(__file__).parent / "fixtures" / "coingecko_markets_page1.json").read_text())
NOW = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)


# -- file ---------------------------------------------------------------------------------


def test_shipped_ranking_file():
    as_of, tokens = FileRankingProvider(SHIPPED).fetch()
    assert as_of == datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert 25 <= len(tokens) <= 40
    assert [t.rank for t in tokens] == list(range(1, len(tokens) + 1))
    assert [t.symbol for t in tokens[:10]] == ["BTC", "ETH", "USDT", "XRP", "BNB", "SOL", "USDC", "DOGE", "ADA", "TRX"]
    assert tokens[0] == RankedToken(rank=1, symbol="BTC", name="Bitcoin", market_cap_usd=tokens[0].market_cap_usd,
                                    circulating_supply=tokens[0].circulating_supply)
    caps = [t.market_cap_usd for t in tokens]
    assert caps == sorted(caps, reverse=True) and caps[0] > 1e12
    assert all(t.circulating_supply > 0 and t.name for t in tokens)


def write(tmp_path, data, name="rankings.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def good_doc():
    return {"as_of": "2026-11-20T00:00:00Z", "tokens": [
        {"rank": 2, "symbol": "eth", "name": "Ethereum", "market_cap_usd": 4.7e11, "circulating_supply": 120698311},
        {"rank": 1, "symbol": "BTC", "name": "Bitcoin", "market_cap_usd": 2.07e12, "circulating_supply": 19955312},
        {"rank": 3, "symbol": "NEW", "name": "New token", "market_cap_usd": None, "circulating_supply": None},
    ]}


def test_file_provider_sorts_by_rank_and_upper_cases(tmp_path):
    as_of, tokens = FileRankingProvider(write(tmp_path, good_doc())).fetch()
    assert as_of == datetime(2026, 11, 20, tzinfo=timezone.utc)
    assert tokens == [
        RankedToken(1, "BTC", "Bitcoin", 2.07e12, 19955312.0),
        RankedToken(2, "ETH", "Ethereum", 4.7e11, 120698311.0),
        RankedToken(3, "NEW", "New token", None, None),
    ]


def first_token(**changes):
    """The good document with tokens[0] changed."""
    doc = good_doc()
    doc["tokens"][0].update(changes)
    return doc


@pytest.mark.parametrize("doc, message", [
    ("{not json", "not valid JSON"),
    ([1, 2], "top level must be an object"),
    ({"tokens": []}, "'as_of' must be"),
    ({"as_of": "yesterday", "tokens": [{}]}, "'as_of' is not an ISO 8601 time"),
    ({"as_of": "2026-11-20T00:00:00Z", "tokens": []}, "'tokens' must be a non-empty list"),
    ({"as_of": "2026-11-20T00:00:00Z", "tokens": ["BTC"]}, r"tokens\[0\] must be an object"),
    (first_token(rank=0), r"tokens\[0\]\.rank must be a positive integer"),
    (first_token(rank=1.5), r"tokens\[0\]\.rank must be a positive integer"),
    (first_token(rank=True), r"tokens\[0\]\.rank must be a positive integer"),
    (first_token(symbol=""), r"tokens\[0\]\.symbol must be a non-empty string"),
    (first_token(name=7), r"tokens\[0\]\.name must be a string"),
    (first_token(market_cap_usd=-1), r"tokens\[0\]\.market_cap_usd must be a non-negative number or null"),
    (first_token(circulating_supply="lots"), r"tokens\[0\]\.circulating_supply must be a non-negative number"),
    (first_token(rank=1), r"tokens\[1\]\.rank 1 repeats tokens\[0\]"),
    (first_token(symbol="btc"), r"tokens\[1\]\.symbol 'BTC' repeats tokens\[0\]"),
])
def test_file_provider_rejects_bad_files(tmp_path, doc, message):
    path = write(tmp_path, doc)
    with pytest.raises(ValueError, match=message) as info:
        FileRankingProvider(path).fetch()
    assert str(path) in str(info.value)  # the message names the file


# -- CoinGecko ---------------------------------------------------------------------------


def provider_with(handler, **kwargs):
    client = httpx.Client(transport=httpx.MockTransport(handler), timeout=5)
    return CoinGeckoRankingProvider(client=client, now=lambda: NOW, **kwargs)


def test_coingecko_maps_the_recorded_page():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json=PAGE1)

    as_of, tokens = provider_with(handler, api_key="CG-demo-key", per_page=250).fetch()

    request = seen[0]
    assert request.url.path == "/api/v3/coins/markets" and request.url.host == "api.coingecko.com"
    assert dict(request.url.params) == {"vs_currency": "usd", "order": "market_cap_desc",
                                        "per_page": "250", "page": "1"}
    assert request.headers["x-cg-demo-api-key"] == "CG-demo-key"
    assert len(seen) == 1  # fewer rows than per_page: no second page

    assert as_of == datetime(2026, 11, 20, 8, 42, 42, 396000, tzinfo=timezone.utc)  # max last_updated
    assert [t.rank for t in tokens] == list(range(1, 11))
    assert [t.symbol for t in tokens] == ["BTC", "ETH", "USDT", "XRP", "BNB", "SOL", "USDC", "DOGE", "STETH", "ADA"]
    btc = PAGE1[0]
    assert tokens[0] == RankedToken(rank=1, symbol="BTC", name="Bitcoin", market_cap_usd=float(btc["market_cap"]),
                                    circulating_supply=btc["circulating_supply"])
    assert tokens[8].name == "Lido Staked Ether"


def test_coingecko_pages_duplicates_unranked_and_pro_key():
    pages = {
        "1": [dict(PAGE1[0]), dict(PAGE1[1]), dict(PAGE1[2], last_updated=None)],
        "2": [dict(PAGE1[3], id="wrapped-btc-clone", symbol="btc", name="BTC clone", market_cap_rank=4),
              dict(PAGE1[4], id="fresh-listing", symbol="new", market_cap_rank=None, market_cap=None)],
    }
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json=pages[request.url.params["page"]])

    as_of, tokens = provider_with(handler, base_url="https://pro-api.coingecko.com/api/v3/", api_key="CG-pro",
                                  per_page=3, pages=3).fetch()
    assert [r.url.params["page"] for r in seen] == ["1", "2"]  # page 2 was short: stop
    assert seen[0].headers["x-cg-pro-api-key"] == "CG-pro" and "x-cg-demo-api-key" not in seen[0].headers
    assert seen[0].url.host == "pro-api.coingecko.com"
    assert [(t.rank, t.symbol) for t in tokens] == [(1, "BTC"), (2, "ETH"), (3, "USDT")]
    assert tokens[0].name == "Bitcoin"  # the better ranked of the two "BTC"
    assert as_of == datetime(2026, 11, 20, 8, 41, 14, 137000, tzinfo=timezone.utc)


def test_coingecko_without_last_updated_uses_now():
    rows = [dict(row, last_updated=None) for row in PAGE1[:3]]
    as_of, tokens = provider_with(lambda request: httpx.Response(200, json=rows)).fetch()
    assert as_of == NOW and len(tokens) == 3


def test_coingecko_429_raises_rate_limited_with_retry_after():
    body = {"status": {"error_code": 429, "error_message": "You've exceeded the Rate Limit. Please visit "
                                                           "https://www.coingecko.com/en/api/pricing to subscribe "
                                                           "to our API plans for higher rate limits."}}
    provider = provider_with(lambda request: httpx.Response(429, json=body, headers={"Retry-After": "60"}))
    with pytest.raises(RateLimited) as info:
        provider.fetch()
    assert info.value.retry_after == 60.0
    assert isinstance(info.value, RankingProviderError)

    http_date = "Fri, 20 Nov 2026 09:02:00 GMT"  # two minutes after NOW
    provider = provider_with(lambda request: httpx.Response(429, headers={"Retry-After": http_date}))
    with pytest.raises(RateLimited) as info:
        provider.fetch()
    assert info.value.retry_after == 120.0

    with pytest.raises(RateLimited) as info:
        provider_with(lambda request: httpx.Response(429)).fetch()
    assert info.value.retry_after is None


@pytest.mark.parametrize("status", [500, 502, 503])
def test_coingecko_5xx_raises_provider_unavailable(status):
    provider = provider_with(lambda request: httpx.Response(status, text="<html>error code: 1015</html>"))
    with pytest.raises(ProviderUnavailable, match=f"HTTP {status}"):
        provider.fetch()


def test_coingecko_timeout_and_connect_error_raise_provider_unavailable():
    def timeout(request):
        raise httpx.ReadTimeout("timed out", request=request)

    def refused(request):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(ProviderUnavailable, match="timed out"):
        provider_with(timeout).fetch()
    with pytest.raises(ProviderUnavailable, match="unreachable"):
        provider_with(refused).fetch()


def test_coingecko_other_http_errors():
    body = {"status": {"error_code": 10002, "error_message": "API Key Missing"}}
    with pytest.raises(RankingProviderError, match="HTTP 401") as info:
        provider_with(lambda request: httpx.Response(401, json=body)).fetch()
    assert not isinstance(info.value, (RateLimited, ProviderUnavailable))


@pytest.mark.parametrize("response, message", [
    (httpx.Response(200, text='[{"id": "bitcoin", "symbol": "btc"'), "not JSON"),
    (httpx.Response(200, text="<!DOCTYPE html><title>Just a moment...</title>"), "not JSON"),
    (httpx.Response(200, json={"error": "coin not found"}), "expected a JSON list"),
    (httpx.Response(200, json=["bitcoin"]), "expected an object"),
    (httpx.Response(200, json=[dict(PAGE1[0], symbol=None)]), "missing symbol"),
    (httpx.Response(200, json=[dict(PAGE1[0], market_cap_rank="one")]), "bad market_cap_rank"),
    (httpx.Response(200, json=[dict(PAGE1[0], market_cap="2e12")]), "bad market_cap"),
])
def test_coingecko_malformed_responses_raise_value_error(response, message):
    with pytest.raises(ValueError, match=message):
        provider_with(lambda request: response).fetch()


def test_coingecko_argument_checks():
    with pytest.raises(ValueError):
        CoinGeckoRankingProvider(per_page=251)
    with pytest.raises(ValueError):
        CoinGeckoRankingProvider(pages=0)
