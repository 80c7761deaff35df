from django.urls import path

from . import views

app_name = "billing"

urlpatterns = [
    path("account/usage/", views.usage_page, name="usage"),
]
