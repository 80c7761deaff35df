from django.urls import path

from . import views

app_name = "billing"

urlpatterns = [
    path("account/usage/", views.usage_page, name="usage"),
    path("account/plan/", views.plan_page, name="plan"),
    path("account/plan/checkout/", views.plan_checkout, name="checkout"),
    path("account/plan/billing-portal/", views.plan_portal, name="portal"),
    # Stripe's webhook, for Stripe and not a client: under /api/ (every error in the API's envelope), outside v1
    path("api/billing/stripe/webhook", views.stripe_webhook, name="stripe-webhook"),
]
