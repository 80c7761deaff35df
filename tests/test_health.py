import pytest


@pytest.mark.django_db
def test_healthz_answers_ok_without_a_key(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["checks"]["database"] == "ok"


@pytest.mark.django_db
def test_healthz_names_the_failing_check(client, monkeypatch):
    from config import health

    def broken():
        raise ConnectionError("refused")

    monkeypatch.setitem(health.CHECKS, "cache", broken)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert "refused" in response.json()["checks"]["cache"]


@pytest.mark.django_db
def test_healthz_reports_stalled_ingestion(client, settings):
    from datetime import timedelta

    from django.utils import timezone

    from market.services import catalog_seed_demo
    from streaming.models import IngestionState

    pair = catalog_seed_demo()[0]
    IngestionState.objects.create(pair=pair, wanted=True, heartbeat_at=timezone.now() - timedelta(hours=1))
    response = client.get("/healthz")
    assert response.status_code == 503 and "heartbeat" in response.json()["checks"]["ingestion"]
