from django.urls import path

from . import views

app_name = "streaming"

urlpatterns = [
    path("account/streams/", views.streams_page, name="streams"),
    path("account/streams/subscribe/", views.subscribe, name="subscribe"),
    path("account/streams/<int:subscription_id>/unsubscribe/", views.unsubscribe, name="unsubscribe"),
    path("account/live/", views.live_page, name="live"),
    path("account/live/<str:exchange>/<str:base>/<str:quote>/open/", views.live_open, name="live-open"),
]
