from config.settings.test import *  # noqa: F401,F403

ROOT_URLCONF = "tests.integration.urls"
