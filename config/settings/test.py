"""Tests: embedded by default, full mode when DATABASE_URL / REDIS_URL are set (CI)."""

import os
import re

# Parallel test processes (pytest-xdist: gw0, gw1, ...) get a database each from
# pytest-django; each gets a Redis database of its own too, the next ones after REDIS_URL's,
# so one process's live pairs, keys and counters never reach another's (pair ids repeat).
_worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
if _worker and os.environ.get("REDIS_URL") and not os.environ.get("TEST_REDIS_OF_WORKER"):
    _url = re.match(r"(redis://[^/]*)(?:/(\d+))?(.*)", os.environ["REDIS_URL"])
    os.environ["REDIS_URL"] = f"{_url[1]}/{int(_url[2] or 0) + 1 + int(_worker[1])}{_url[3]}"
    os.environ["TEST_REDIS_OF_WORKER"] = _worker[1]  # the servers a test starts inherit it as it is

from .base import *  # noqa: E402,F401,F403
from .base import CACHES, REDIS_URL, env  # noqa: E402

# Cheap argon2 parameters keep the suite fast; the production parameters are benchmarked.
API_KEY_ARGON2 = {"time_cost": 1, "memory_cost": 1024, "parallelism": 1}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
WHITENOISE_USE_FINDERS = True
# Look a static file up when it is asked for, not by walking every app's static folder each
# time a test client loads the middleware: the walk was 3 % of the suite's in-process CPU.
WHITENOISE_AUTOREFRESH = True
STATIC_ROOT = None  # served from the app folders; only production collects static files
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if REDIS_URL:
    # Tests share one Redis with nothing else; a prefix keeps their keys apart.
    CACHES["default"]["KEY_PREFIX"] = "mdp-test"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=True)
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="memory://")

# Tests drive ingestion steps themselves; integration tests start real workers.
INGESTION_AUTOSTART = env.bool("INGESTION_AUTOSTART", default=False)
INGESTION_IN_PROCESS = env.bool("INGESTION_IN_PROCESS", default=False)
# Detector tests drive the engine directly; ingestion tests run without it unless they ask.
SCHEMES_DETECTION = env.bool("SCHEMES_DETECTION", default=False)
# In-process tests edit the catalog and accounts and read them back at once; running servers
# (tests/integration/settings.py) cache it as production does.
CATALOG_CACHE_SECONDS = env.float("CATALOG_CACHE_SECONDS", default=0.0)
ACCOUNT_CACHE_SECONDS = env.float("ACCOUNT_CACHE_SECONDS", default=0.0)
PAIR_STATUS_CACHE_SECONDS = env.float("PAIR_STATUS_CACHE_SECONDS", default=0.0)
HISTORY_CACHE_SECONDS = env.float("HISTORY_CACHE_SECONDS", default=0.0)
