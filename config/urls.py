from django.contrib import admin
from django.urls import include, path, re_path

from billing.api import UsageAliasView, UsageView, usage_alias_on_loop, usage_on_loop
from config.api.views import SchemaView, unknown_api_path
from config.explorer import CustomerExplorerView
from config.health import healthz
from config.pages import home
from market.api import CandlestickView, LimitOrdersView, SpreadView, TradesView, series_on_loop

api_v1 = [
    path("me/usage", UsageView.as_view(), name="me-usage"),
    path("", include("market.urls")),
    path("", include("streaming.urls")),
    path("", include("schemes.urls")),
    path("schema", SchemaView.as_view(), name="schema"),
    path("docs", CustomerExplorerView.as_view(url_name="schema"), name="docs"),
]

# The API first: the page includes below have empty prefixes, so Django enters each and
# fails it (building its "tried" list) before it reaches a path that comes after them.
urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("", home, name="home"),
    path("", include("accounts.urls")),
    path("", include("billing.urls")),
    path("", include("streaming.page_urls")),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("v1/me/usage", UsageAliasView.as_view(), name="me-usage-alias"),
    re_path(r"^(?:api/)?v1/(?P<rest>.*)$", unknown_api_path),
    re_path(r"^api/(?P<rest>.*)$", unknown_api_path),
]

handler404 = "config.api.views.handler404"
handler500 = "config.api.views.handler500"

# Plain requests these paths answer on the event loop, with their views above for the rest
# (config/loop.py).
LOOP_ROUTES = {"/api/v1/me/usage": usage_on_loop, "/v1/me/usage": usage_alias_on_loop,
               **{f"/api/v1/market/{name}": series_on_loop(view) for name, view in (
                   ("candlestick", CandlestickView), ("limit-orders", LimitOrdersView), ("trades", TradesView),
                   ("spread", SpreadView))}}
