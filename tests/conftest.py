import gc
import os

import pytest
from django.core.cache import cache
from django.db import connection
from rest_framework.test import APIClient

from accounts.services import account_upsert, api_key_create
from billing.services import plans_seed_defaults


PROCESS_STARTERS = ("daphne_processes", "demo_server", "embedded_site", "sqlite_site")


def _starts_processes(item) -> bool:
    """The test drives servers, a browser or a local exchange of its own: it mostly waits on them."""
    if item.nodeid.startswith(("tests/e2e/", "tests/integration/", "tests/venues/")):
        return True
    module = getattr(item, "module", None)
    return module is not None and any(name in vars(module) for name in PROCESS_STARTERS)


def pytest_collection_modifyitems(config, items):
    """Tests marked postgres / redis run whenever those servers are configured. Under
    pytest-xdist, the files marked slow go first, one to a worker, then those marked heavy
    and the tests that start processes, so that their waits overlap the tests that compute,
    and the light files fill the end of the run instead of one long file trailing it alone
    (otherwise the order is the files')."""
    from django.conf import settings

    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: (item.get_closest_marker("slow") is None,
                                     item.get_closest_marker("heavy") is None and not _starts_processes(item)))

    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    on_redis = bool(settings.REDIS_URL)
    for item in items:
        if "postgres" in item.keywords and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL"))
        if "redis" in item.keywords and not on_redis:
            item.add_marker(pytest.mark.skip(reason="needs Redis: set REDIS_URL"))


def pytest_collection_finish(session):
    """A test process is long-lived and allocates like the servers: it collects as they do
    (config/collector.py). At Python's default thresholds, collections took 11 % of the
    CPU of the tests that run in-process; with these, 5 %. Pauses are not logged here: the
    log would outlive pytest's captured streams."""
    from config.collector import collect_less_often

    gc.collect()
    collect_less_often(log_long_pauses=False)


@pytest.fixture(scope="session", autouse=True)
def _site_templates(tmp_path_factory):
    """Prepared SQLite sites are shared by the run's processes (tests.integration.servers.sqlite_site)."""
    from tests.integration import servers

    root = tmp_path_factory.getbasetemp()
    servers.SITE_TEMPLATES = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "site-templates"
    yield
    servers.SITE_TEMPLATES = None


@pytest.fixture(autouse=True)
def _clean_cache():
    from billing import metering

    cache.clear()
    metering._refused_lately.clear()  # account ids come back after a test's rollback
    yield
    cache.clear()


@pytest.fixture
def plans(db):
    return {plan.name: plan for plan in plans_seed_defaults()}


@pytest.fixture
def make_account(plans):
    counter = iter(range(1, 10_000))

    def make(plan="pro", email=None, password="correct horse battery", payment=None):
        email = email or f"user{next(counter)}@example.com"
        return account_upsert(email=email, plan=plans[plan], password=password, payment=payment).account

    return make


@pytest.fixture
def account(make_account):
    return make_account()


@pytest.fixture
def api_key(account):
    return api_key_create(account=account, name="test key")


@pytest.fixture
def client_for():
    def make(plaintext):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        return client

    return make


@pytest.fixture
def api(api_key, client_for):
    """An API client authenticated with a Pro account's key."""
    return client_for(api_key.plaintext)


def is_postgres() -> bool:
    return connection.vendor == "postgresql"
