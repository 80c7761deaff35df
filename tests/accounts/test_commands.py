import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounts.models import ApiKey, User
from billing.models import Plan

ROOT = Path(__file__).resolve().parents[2]


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_plan_command_creates_then_updates():
    run("plan", "team", "--features", "api,streaming", "--monthly-requests", "500",
        "--monthly-bytes", "9000", "--pair-price-usd", "7.5")
    plan = Plan.objects.get(name="team")
    assert (plan.has_api, plan.has_streaming, plan.monthly_requests, plan.monthly_bytes) == (True, True, 500, 9000)
    run("plan", "team", "--features", "")
    plan.refresh_from_db()
    assert plan.features == [] and plan.monthly_requests == 500


@pytest.mark.django_db
def test_plan_command_rejects_unknown_features_and_negative_quotas():
    with pytest.raises(CommandError, match="Unknown feature"):
        run("plan", "x", "--features", "api,teleport")
    with pytest.raises(CommandError, match="negative"):
        run("plan", "x", "--monthly-requests", "-1")


def test_account_command_creates_and_updates(plans):
    run("account", "Quant@Example.com", "--plan", "pro", "--password", "pw-123456")
    user = User.objects.get(email="quant@example.com")
    assert user.account.plan.name == "pro" and user.check_password("pw-123456")
    run("account", "quant@example.com", "--plan", "enterprise", "--payment", "lapsed")
    user.account.refresh_from_db()
    assert (user.account.plan.name, user.account.payment) == ("enterprise", "lapsed")
    with pytest.raises(CommandError, match="No plan"):
        run("account", "quant@example.com", "--plan", "platinum")


def test_apikey_command_prints_only_the_key_and_stops_at_the_cap(plans, capsys):
    run("account", "k@example.com", "--plan", "pro")
    for name in ("a", "b"):
        call_command("apikey", "k@example.com", "--name", name)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("mdp_live_") and len(line) == 59 for line in lines)
    with pytest.raises(CommandError, match="at most 2"):
        call_command("apikey", "k@example.com", "--name", "c")
    lookup = lines[0][9:21]
    call_command("apikey", "k@example.com", "--revoke", lookup, stderr=io.StringIO())
    assert ApiKey.objects.get(lookup_id=lookup).revoked_at is not None


def test_seed_demo_is_safe_to_run_again(db, client_for):
    first = run("seed_demo", "--history-days", "2")
    second = run("seed_demo", "--history-days", "2")
    key1 = next(w for w in first.split() if w.startswith("mdp_live_"))
    key2 = next(w for w in second.split() if w.startswith("mdp_live_"))
    assert key1 != key2
    assert set(Plan.objects.values_list("name", flat=True)) >= {"free", "pro", "enterprise"}
    assert client_for(key2).get("/api/v1/me/usage").status_code == 200
    assert client_for(key1).get("/api/v1/me/usage").status_code == 401
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 1
    assert ApiKey.objects.get(lookup_id=key1[9:21]).revoked_via == "demo_seed"  # replaced, and it says so


def test_seeded_plans_have_the_features_of_api_md(plans):
    assert plans["free"].features == []
    assert plans["pro"].features == ["api", "streaming"]
    assert plans["enterprise"].features == ["api", "streaming"]
    assert plans["enterprise"].monthly_requests > plans["pro"].monthly_requests


def test_check_deploy_with_production_settings_reports_nothing():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production",
           "SECRET_KEY": "x" * 20 + "-production-secret-0123456789abcdefghijklmnop",
           "ALLOWED_HOSTS": "api.example.com"}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_seed_demo_fills_hourly_history_once_and_subscribes_the_demo(db):
    from market.models import DayBar, HourBar
    from streaming.models import StreamSubscription

    out = run("seed_demo", "--history-days", "2")
    hours = HourBar.objects.count()
    assert "History:" in out and hours >= 17 * 47
    assert DayBar.objects.count() >= 17 * 2
    run("seed_demo", "--history-days", "2")
    assert HourBar.objects.count() in (hours, hours + 17)  # at most the hour that just began
    assert StreamSubscription.objects.filter(account__users__email="demo@example.com").count() == 2
