from config.settings.test import *  # noqa: F401,F403
from config.settings.test import env

ROOT_URLCONF = "tests.integration.urls"

CATALOG_CACHE_SECONDS = env.float("CATALOG_CACHE_SECONDS", default=1.0)
ACCOUNT_CACHE_SECONDS = env.float("ACCOUNT_CACHE_SECONDS", default=0.5)
PAIR_STATUS_CACHE_SECONDS = env.float("PAIR_STATUS_CACHE_SECONDS", default=1.0)
HISTORY_CACHE_SECONDS = env.float("HISTORY_CACHE_SECONDS", default=1.0)
