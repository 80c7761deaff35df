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
