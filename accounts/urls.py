from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("signin/", views.LoginView.as_view(), name="login"),
    path("signout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/keys/", views.api_keys, name="keys"),
    path("account/keys/<int:key_id>/revoke/", views.api_key_revoke_confirm, name="revoke"),
]

urlpatterns += [
    path("account/keys/<int:key_id>/rename/", views.api_key_rename_page, name="rename"),
]
