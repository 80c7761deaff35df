from django.urls import path

from market.urls import STREAM_PAIR as PAIR

from . import api

urlpatterns = [
    path("streams", api.StreamsView.as_view(), name="streams"),
    path(PAIR, api.StreamPairView.as_view(), name="stream-pair"),
    path(f"{PAIR}/status", api.StatusView.as_view(), name="stream-status"),
    path(f"{PAIR}/snapshot", api.SnapshotView.as_view(), name="stream-snapshot"),
    path(f"{PAIR}/live", api.LiveView.as_view(), name="stream-live"),
    path(f"{PAIR}/token", api.StreamTokenView.as_view(), name="stream-token"),
]
