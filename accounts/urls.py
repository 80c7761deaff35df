from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("signin/", views.LoginView.as_view(), name="login"),
    path("signout/", views.LogoutView.as_view(), name="logout"),
    path("signup/", views.SignupView.as_view(), name="signup"),
    path("signup/sent/", views.signup_sent, name="signup_sent"),
    path("signup/resend/", views.SignupResendView.as_view(), name="signup_resend"),
    path("signup/confirm/<uidb64>/<token>/", views.signup_confirm_link, name="signup_confirm"),
    path("password/reset/", views.PasswordResetView.as_view(), name="password_reset"),
    path("password/reset/sent/", views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("password/reset/<uidb64>/<token>/", views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("password/reset/done/", views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("account/keys/", views.api_keys, name="keys"),
    path("account/keys/<int:key_id>/revoke/", views.api_key_revoke_confirm, name="revoke"),
]
