"""Embedded mode on a laptop: `make run`. DEBUG stays off unless asked for, so the pages and
errors a developer sees are the ones customers see."""

from .base import *  # noqa: F401,F403
from .base import env

DEBUG = env.bool("DEBUG", default=False)
# whitenoise serves straight from the app folders, so `make run` needs no collectstatic.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT = None  # served from the app folders; only production collects static files
WHITENOISE_AUTOREFRESH = DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# The demo pairs act out a spoofing episode every few minutes, so a new user sees scheme
# events on the Live page soon after subscribing.
SIMULATOR_EPISODES_PER_HOUR = env.float("SIMULATOR_EPISODES_PER_HOUR", default=20.0)
