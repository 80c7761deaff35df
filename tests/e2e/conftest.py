"""Real-browser end-to-end tests: Playwright (sync API) drives Debian's Chromium against a
real daphne process (tests/integration/servers.py).

Where the server's rows live:
- PostgreSQL (full mode): pytest-django's test database, the tests marked
  `django_db(transaction=True)` as in tests/integration: what a test writes is committed,
  so the server process sees it, and it is flushed after the test.
- SQLite (embedded mode): pytest-django's SQLite test database is in memory, which no other
  process can open. The server gets a temporary SQLite file instead, migrated once per run,
  and the tests write their rows into that file with the same service functions, Django's
  default connection pointing at it for the while (`ServerDatabase.orm()`). Every test uses
  its own account, so tests sharing the file do not meet.

Servers: `server` (no ingestion) is one daphne process shared by the package's tests;
`ingesting_server` is a daphne process of its own with live ingestion, inside it in embedded
mode (INGESTION_IN_PROCESS), by a Celery worker (tests/integration/workers.py) with Redis.

While the browser is open, Playwright's sync API keeps an asyncio loop marked as running on
this thread, which Django takes for async code and refuses ORM calls
(SynchronousOnlyOperation). The tests here touch the ORM only from plain synchronous code
between browser steps, so DJANGO_ALLOW_ASYNC_UNSAFE is set exactly while the browser is open
(never for the server processes), and the browser closes when this package's tests are done,
before any other test runs.

Chromium: Playwright's own browser download does not work here; the tests launch Debian's
build of Chromium's headless shell, /usr/bin/chromium-headless-shell (`apt-get install -y
chromium-headless-shell`; .ci/run does it), and skip without it. It is the same engine as
the chromium package, the browser Playwright itself runs headless, and it costs 60 % less
CPU than the full browser in its headless mode (docs/DECISIONS.md).
Every test leaves a full-page screenshot at build/e2e/<test name>.png."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection, connections

from tests.integration.servers import ROOT, daphne_processes, database_url_for, sqlite_site
from tests.integration.workers import celery_worker

CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = ROOT / "build" / "e2e"
SETTINGS_MODULE = "tests.integration.settings"
PASSWORD = "correct horse battery staple"
# The server processes keep Django's async-safety check, whatever this process does.
SERVER_ENV = {"DJANGO_ALLOW_ASYNC_UNSAFE": "", "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE}


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def _missing() -> str | None:
    """Why the browser cannot run here, if it cannot."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"needs Chromium at {CHROMIUM}: apt-get install -y chromium-headless-shell (.ci/run installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "needs playwright: pip install -e '.[dev]'"
    return None


def pytest_collection_modifyitems(config, items):
    """Skip without a browser (before any server starts). On PostgreSQL the tests write
    committed rows to pytest-django's test database (flushed after each test), as
    tests/integration does."""
    here = Path(__file__).parent
    ours = [item for item in items if here in Path(item.path).parents]
    missing = _missing() if ours else None
    for item in ours:
        if missing:
            item.add_marker(pytest.mark.skip(reason=missing))
        elif _on_postgres():
            item.add_marker(pytest.mark.django_db(transaction=True))


# -- the browser ---------------------------------------------------------------------------

@pytest.fixture(scope="package")
def browser():
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as env, sync_playwright() as playwright:
        env.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # see the module's docstring
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(request, browser):
    """A fresh browser context and page; a full-page screenshot when the test ends, taken
    while the server still runs (a per-test ingesting server is set up first, so it is torn
    down after)."""
    if "ingesting_server" in request.fixturenames:
        request.getfixturevalue("ingesting_server")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        yield page
    finally:
        try:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
        finally:
            context.close()


# -- the server's database -----------------------------------------------------------------

@dataclass
class ServerDatabase:
    url: str
    sqlite_path: Path | None = None
    blocker: object = None

    @contextmanager
    def orm(self):
        """Django's ORM on the server's database, for seeding and checking rows."""
        if self.sqlite_path is None:  # PostgreSQL: already the test database
            yield
            return
        original = connections["default"]
        wrapper = original.__class__({**original.settings_dict, "NAME": str(self.sqlite_path)}, alias="default")
        connections["default"] = wrapper
        try:
            with self.blocker.unblock():
                yield
        finally:
            wrapper.close()
            connections["default"] = original


@pytest.fixture(scope="package")
def _server_database(request, tmp_path_factory) -> tuple[str, Path | None]:
    """The servers' database: (DATABASE_URL, the SQLite file or None for PostgreSQL)."""
    if _on_postgres():
        request.getfixturevalue("django_db_setup")
        return database_url_for(connection.settings_dict), None
    env, _ = sqlite_site(tmp_path_factory.mktemp("e2e-db"), ("migrate", "--noinput", "-v0"))
    return env["DATABASE_URL"], Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


@pytest.fixture
def server_db(_server_database, django_db_blocker) -> ServerDatabase:
    url, sqlite_path = _server_database
    return ServerDatabase(url=url, sqlite_path=sqlite_path, blocker=django_db_blocker)


@dataclass
class Customer:
    email: str
    password: str
    account_id: int


@pytest.fixture
def customer(server_db) -> Customer:
    """A Pro customer who can sign in, in the server's database, with the demo catalog."""
    from accounts.services import account_upsert
    from billing.services import plans_seed_defaults
    from market.services import catalog_seed_demo

    email = f"e2e-{uuid.uuid4().hex[:10]}@example.com"
    with server_db.orm():
        plans = {plan.name: plan for plan in plans_seed_defaults()}
        catalog_seed_demo()
        user = account_upsert(email=email, plan=plans["pro"], password=PASSWORD, account_name="E2E Quant Desk")
    return Customer(email=email, password=PASSWORD, account_id=user.account_id)


@pytest.fixture
def customer_key(server_db, customer) -> str:
    """A live API key of the customer (plaintext), created by the service, not the page."""
    from accounts.models import Account
    from accounts.services import api_key_create

    with server_db.orm():
        return api_key_create(account=Account.objects.get(pk=customer.account_id), name="e2e setup key").plaintext


# -- the server processes ------------------------------------------------------------------

def _server_env(database_url: str, *, ingest: bool) -> dict[str, str]:
    env = {**SERVER_ENV, "DATABASE_URL": database_url, "REDIS_URL": settings.REDIS_URL,
           "INGESTION_AUTOSTART": "false", "INGESTION_IN_PROCESS": "false"}
    if ingest:
        env["INGESTION_AUTOSTART"] = "true"
        if settings.REDIS_URL:  # full mode: a Celery worker ingests, as in production
            env.update({"CELERY_BROKER_URL": settings.REDIS_URL, "CELERY_TASK_ALWAYS_EAGER": "false"})
        else:  # embedded mode: the server process ingests
            env["INGESTION_IN_PROCESS"] = "true"
    return env


@pytest.fixture(scope="package")
def server(_server_database) -> str:
    """A daphne process without ingestion, shared by this package's tests (each test writes
    its own account; in full mode the rows are flushed between tests, the server stays)."""
    url, _ = _server_database
    with daphne_processes(1, env=_server_env(url, ingest=False), settings_module=SETTINGS_MODULE) as (base,):
        yield base


def _kill_worker(worker: subprocess.Popen) -> None:
    """Stop the Celery worker at once, its embedded beat process too. Its warm shutdown
    would wait out the long-running ingestion task (15 s, then a kill that leaves the beat
    process orphaned); the test is over and its rows are about to go."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == worker.pid:
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
    worker.kill()
    worker.wait(timeout=10)


@pytest.fixture
def ingesting_server(server_db) -> str:
    """A daphne process of its own with live ingestion: in-process (embedded mode) or a
    Celery worker with beat (Redis)."""
    env = _server_env(server_db.url, ingest=True)
    with ExitStack() as stack:
        if settings.REDIS_URL:
            worker = stack.enter_context(celery_worker(env=env))
            stack.callback(_kill_worker, worker)
        (base,) = stack.enter_context(daphne_processes(1, env=env, settings_module=SETTINGS_MODULE))
        yield base


@pytest.fixture
def api():
    """An HTTP client for the API with a key: api(base, key)."""
    clients = []

    def make(base: str, key: str) -> httpx.Client:
        clients.append(httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def sign_in():
    """sign_in(page, base, customer): through the sign-in form; ends on the signed-in page."""

    def run(page, base: str, customer: Customer) -> None:
        page.goto(f"{base}/signin/")
        page.get_by_label("Email").fill(customer.email)
        page.get_by_label("Password").fill(customer.password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{base}/account/keys/")

    return run
