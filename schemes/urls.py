from django.urls import path

from market.urls import STREAM_PAIR

from . import api

urlpatterns = [
    path(f"{STREAM_PAIR}/schemes", api.SchemesView.as_view(), name="stream-schemes"),
]
