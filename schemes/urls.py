from django.urls import path

from streaming.urls import PAIR

from . import api

urlpatterns = [
    path(f"{PAIR}/schemes", api.SchemesView.as_view(), name="stream-schemes"),
]
