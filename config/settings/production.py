"""Full mode behind TLS: daphne processes, Celery workers, PostgreSQL and Redis."""

from .base import *  # noqa: F401,F403
from .base import env

DEBUG = False
SECRET_KEY = env("SECRET_KEY")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True

# E-mail goes out by SMTP: EMAIL_URL=smtp+tls://USER:PASSWORD@HOST:587 (or smtps://...:465);
# without it, Django's default, a mail server on this host.
vars().update(env.email_url("EMAIL_URL", default="smtp://localhost:25"))
