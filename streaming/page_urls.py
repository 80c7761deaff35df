from django.urls import path

from . import views

app_name = "streaming"

urlpatterns = [
    path("account/streams/", views.streams_page, name="streams"),
    path("account/streams/<int:subscription_id>/unsubscribe/", views.unsubscribe, name="unsubscribe"),
]
