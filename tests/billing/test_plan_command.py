import io

import pytest
from django.core.management import CommandError, call_command

from billing.models import Plan


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_the_plan_command_sets_the_monthly_price_and_the_stripe_price_it_is_sold_with():
    out = run("plan", "team", "--features", "api", "--monthly-price-usd", "19.50", "--stripe-price", "price_team")
    plan = Plan.objects.get(name="team")
    assert (str(plan.monthly_price_usd), plan.stripe_price_id) == ("19.50", "price_team")
    assert "monthly_price_usd=19.50 stripe_price=price_team" in out
    run("plan", "team", "--stripe-price", "")
    plan.refresh_from_db()
    assert plan.stripe_price_id == "" and str(plan.monthly_price_usd) == "19.50"


@pytest.mark.django_db
def test_the_plan_command_refuses_a_negative_price_an_odd_price_id_and_one_price_for_two_plans():
    with pytest.raises(CommandError, match="negative"):
        run("plan", "x", "--monthly-price-usd", "-1")
    with pytest.raises(CommandError, match="price_"):
        run("plan", "x", "--stripe-price", "prod_123")
    run("plan", "one", "--stripe-price", "price_shared")
    with pytest.raises(CommandError):
        run("plan", "two", "--stripe-price", "price_shared")
    assert not Plan.objects.filter(name="two").exists()
