from django.urls import path

from . import api

# The path of one streamable pair: the streaming app's views of a pair and the scheme
# history (schemes) hang under it (api.StreamablePairView)
STREAM_PAIR = "streams/<str:exchange>/<str:base>/<str:quote>"

urlpatterns = [
    path("market/candlestick", api.CandlestickView.as_view(), name="market-candlestick"),
    path("market/limit-orders", api.LimitOrdersView.as_view(), name="market-limit-orders"),
    path("market/trades", api.TradesView.as_view(), name="market-trades"),
    path("market/spread", api.SpreadView.as_view(), name="market-spread"),
    path("rank/top", api.RankTopView.as_view(), name="rank-top"),
]
