from django.urls import path

from . import views

app_name = "billing"

urlpatterns = [
    path("account/usage/", views.usage_page, name="usage"),
    path("account/plan/", views.plan_page, name="plan"),
    path("account/plan/checkout/", views.plan_checkout, name="checkout"),
    path("account/plan/billing-portal/", views.plan_portal, name="portal"),
    # Stripe's webhook: under /api/ so that every error leaves in the API's envelope
    path("api/v1/billing/stripe/webhook", views.stripe_webhook, name="stripe-webhook"),
]
