"""Settings shared by every mode. Everything comes from the environment; the embedded
defaults (SQLite file, in-process cache, no broker) need no variable at all."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()

SECRET_KEY = env("SECRET_KEY", default="embedded-insecure-key-change-me-in-production-0123456789")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "billing",
    "market",
    "streaming",
    "schemes",
    # the wiring on top of the apps: its management commands (seed_demo seeds every app)
    "config",
]

MIDDLEWARE = [
    "config.api.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "billing.middleware.MeteringMiddleware",
    "config.api.middleware.ApiErrorMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

VAR_DIR.mkdir(exist_ok=True)  # the embedded SQLite file lives here
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
DB_LOOP_POOL_MAX = 0  # no statements on the event loop (SQLite); PostgreSQL sets it below
DB_LOOP_POOL_TIMEOUT_SECONDS = 1.0
DB_LOOP_STATEMENT_TIMEOUT_SECONDS = 5.0
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Under ASGI every request's sync code may run on its own thread, and persistent
    # per-thread connections pile up past max_connections. A bounded psycopg pool per
    # process makes requests wait for a connection instead.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DB_POOL_MIN", default=1),
        "max_size": env.int("DB_POOL_MAX", default=16),
        "timeout": env.int("DB_POOL_TIMEOUT_SECONDS", default=20),
    }
    # Statements made on the event loop itself (config.db.fetch_prepared_on_loop: the
    # answers served there, config/loop.py) have a small pool of their own; 0 turns that
    # path off and every request takes a thread.
    DB_LOOP_POOL_MAX = env.int("DB_LOOP_POOL_MAX", default=4)
    # (a statement that cannot get a connection this soon is left to the request threads)
    DB_LOOP_POOL_TIMEOUT_SECONDS = env.float("DB_LOOP_POOL_TIMEOUT_SECONDS", default=1.0)
    # (and no statement there runs longer than this: it is refused as the threads' path refuses it)
    DB_LOOP_STATEMENT_TIMEOUT_SECONDS = env.float("DB_LOOP_STATEMENT_TIMEOUT_SECONDS", default=5.0)
    # The hot paths' statements are prepared once per pooled connection (config.db);
    # nothing else is (a threshold no statement reaches). Off (None) for a pooler that
    # cannot carry prepared statements, such as PgBouncer before 1.21 in transaction mode.
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = (
        10**9 if env.bool("DB_PREPARED_STATEMENTS", default=True) else None)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers and the writer work at once; a busy timeout waits for the write lock
    # instead of failing at once with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
         "transaction_mode": "IMMEDIATE"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="")
# A Redis that stops answering fails a request within this time instead of hanging it.
REDIS_SOCKET_TIMEOUT_SECONDS = env.float("REDIS_SOCKET_TIMEOUT_SECONDS", default=2.0)
REDIS_CONNECT_TIMEOUT_SECONDS = env.float("REDIS_CONNECT_TIMEOUT_SECONDS", default=REDIS_SOCKET_TIMEOUT_SECONDS)
# One connection pool per process, built from these by config/redis.py.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "config.cache.ProcessRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env("CACHE_KEY_PREFIX", default="mdp"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "mdp"}}

AUTH_USER_MODEL = "accounts.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "accounts:keys"
LOGOUT_REDIRECT_URL = "accounts:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Files browsers ask for at the site's root (/favicon.ico), served by whitenoise as they are.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# The API refuses bodies past this size with 413 before parsing them.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("MAX_REQUEST_BODY_BYTES", default=64 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["billing.permissions.HasApiAccess"],
    "DEFAULT_RENDERER_CLASSES": [
        "config.api.renderers.JSONRenderer",
        "config.api.renderers.TOONRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": ["config.api.parsers.JSONObjectParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "config.api.negotiation.FormatNegotiation",
    "EXCEPTION_HANDLER": "config.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "config.api.schema.ApiAutoSchema",
    "UNAUTHENTICATED_USER": None,
    "UNAUTHENTICATED_TOKEN": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Market Data API",
    "DESCRIPTION": (
        "Crypto market data: historical series, snapshots, live bars, an SSE feed and live "
        "spoofing detection.\n\n"
        "**Authentication**: `Authorization: Bearer mdp_live_...` (create keys on the API keys page).\n\n"
        "**Formats**: every response, errors included, is JSON (default) or TOON. The first rule "
        "that applies: `Accept: application/toon`, then the body's `format`, then `?format=`, then "
        "JSON. An Accept header admitting neither type gets 415.\n\n"
        "**Errors**: `{\"error\": {\"code\", \"message\", \"details\", \"request_id\"}}` for every status.\n\n"
        "**Quota**: series and control-plane calls count 1 request plus the served bytes against the "
        "monthly budget; every response to a key carries `X-Quota-*` headers; a used-up budget answers "
        "429 with `Retry-After`. `/me/usage` and SSE streams are free."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "streaming.schema.add_events_endpoint",
        "config.api.schema.explorer_examples",
        "config.api.schema.code_samples",
    ],
}

# API keys (accounts.keys / accounts.verification / accounts.services).
API_KEY_PEPPER = env("API_KEY_PEPPER", default=SECRET_KEY)
API_KEY_ARGON2 = {
    "time_cost": env.int("API_KEY_ARGON2_TIME_COST", default=3),
    "memory_cost": env.int("API_KEY_ARGON2_MEMORY_KIB", default=65536),
    "parallelism": env.int("API_KEY_ARGON2_PARALLELISM", default=4),
}
API_KEY_CACHE_SECONDS = env.int("API_KEY_CACHE_SECONDS", default=3600)
API_KEY_LAST_USED_RESOLUTION_SECONDS = 60
# A cached key is checked against the database at most this often: the bound on how long a
# revoke made where this process's key cache cannot see it (embedded mode: another process)
# takes to refuse the key here.
API_KEY_RECHECK_SECONDS = env.float("API_KEY_RECHECK_SECONDS", default=0.5)
# How long a process reuses a catalog lookup (a pair or exchange named by a request): the
# most a staff edit of the catalog takes to reach every process (market.selectors).
CATALOG_CACHE_SECONDS = env.float("CATALOG_CACHE_SECONDS", default=1.0)
# The same for an account and its plan (a plan edit, a payment change).
ACCOUNT_CACHE_SECONDS = env.float("ACCOUNT_CACHE_SECONDS", default=0.5)
# The same for a pair's ingestion signals read by stream connects and status requests (the
# heartbeat's age is still computed at the request).
PAIR_STATUS_CACHE_SECONDS = env.float("PAIR_STATUS_CACHE_SECONDS", default=1.0)
# The same for a series of closed periods (every bar of the range has ended): a late bar or
# a correction of history reaches every process's answers within it (market.selectors).
HISTORY_CACHE_SECONDS = env.float("HISTORY_CACHE_SECONDS", default=1.0)
API_KEY_FAILED_VERIFY_LIMIT = env.int("API_KEY_FAILED_VERIFY_LIMIT", default=10)
API_KEY_FAILED_VERIFY_WINDOW_SECONDS = 300

LOGIN_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
LOGIN_FAILURE_WINDOW_SECONDS = env.int("LOGIN_FAILURE_WINDOW_SECONDS", default=900)
# Sign-up (with its resend) and password reset: submissions per address and email, each
# sending an e-mail (accounts.throttles, the same mechanism as sign-in).
SIGNUP_LIMIT = env.int("SIGNUP_LIMIT", default=5)
SIGNUP_WINDOW_SECONDS = env.int("SIGNUP_WINDOW_SECONDS", default=3600)
PASSWORD_RESET_LIMIT = env.int("PASSWORD_RESET_LIMIT", default=5)
PASSWORD_RESET_WINDOW_SECONDS = env.int("PASSWORD_RESET_WINDOW_SECONDS", default=3600)
# The e-mailed links: a sign-up's confirmation and a password reset, each usable once.
SIGNUP_LINK_TIMEOUT_SECONDS = env.int("SIGNUP_LINK_TIMEOUT_SECONDS", default=2 * 24 * 3600)
PASSWORD_RESET_TIMEOUT = env.int("PASSWORD_RESET_TIMEOUT_SECONDS", default=3600)

# E-mail (sign-up confirmations, password resets), one URL (django-environ): in production
# smtp+tls://USER:PASSWORD@HOST:587 (config/settings/production.py); on a laptop every
# e-mail is printed on the console, the server's output (`make run`); filemail:///DIR
# writes each into a file of DIR.
vars().update(env.email_url("EMAIL_URL", default="consolemail://"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="Market Data API <no-reply@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT_SECONDS", default=10)  # an SMTP server that hangs fails the send, not the page

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL and not env("CELERY_BROKER_URL", default="")
CELERY_TIMEZONE = "UTC"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"django.request": {"level": "ERROR"}},
}

# Market data (market/).
BAR_RETENTION_DAYS = {
    "second": env.int("RETENTION_SECOND_BARS_DAYS", default=7),
    "minute": env.int("RETENTION_MINUTE_BARS_DAYS", default=90),
    "hour": env.int("RETENTION_HOUR_BARS_DAYS", default=0),  # 0: keep
    "day": env.int("RETENTION_DAY_BARS_DAYS", default=0),
}
RANKING_PROVIDER = env("RANKING_PROVIDER", default="file")  # file | coingecko
RANKING_FILE = env("RANKING_FILE", default="")
COINGECKO_API_KEY = env("COINGECKO_API_KEY", default="")
SIMULATOR_SEED = env.int("SIMULATOR_SEED", default=0)
SIMULATOR_EPISODES_PER_HOUR = env.float("SIMULATOR_EPISODES_PER_HOUR", default=4.0)

# Ingestion (streaming/ingestion.py, streaming/ingestor.py, streaming/leases.py).
INGESTION_IN_PROCESS = env.bool("INGESTION_IN_PROCESS", default=not REDIS_URL)
INGESTION_AUTOSTART = env.bool("INGESTION_AUTOSTART", default=True)
# How long after a second ends it may be closed: the exchange's streams (trades, depth, best
# quotes) reach us out of order by up to this. On the real Binance recordings of data/realdata
# an event arrives at most 221 ms behind the fastest (99.99th percentile 217 ms on BTCUSDT,
# 186 ms on ETHUSDT); an event later than this moves to the first moment not read yet (counted).
INGESTION_LAG_MS = env.int("INGESTION_LAG_MS", default=500)
# Between ticks, a process reads its live pairs' events this often, so that a tick only
# reads its second's last moments and writes (0: the tick reads the whole second).
INGESTION_READ_AHEAD_MS = env.int("INGESTION_READ_AHEAD_MS", default=250)
INGESTION_MAX_WINDOW_MS = env.int("INGESTION_MAX_WINDOW_MS", default=120_000)
INGESTION_LEASE_SECONDS = env.int("INGESTION_LEASE_SECONDS", default=30)
INGESTION_BACKFILL_HOURS = env.int("INGESTION_BACKFILL_HOURS", default=24)
# Of the backfill, the last minutes are built from events (second bars); the rest, where
# the source can synthesise history, as minute bars.
INGESTION_EVENT_BACKFILL_MINUTES = env.int("INGESTION_EVENT_BACKFILL_MINUTES", default=10)
INGESTION_GRACE_SECONDS = env.int("INGESTION_GRACE_SECONDS", default=300)
# Every Celery worker process runs an ingestion loop holding its fair share of the pairs
# (false: a worker for the other tasks only); a starting one waits this long for the others
# started with it, so they share the pairs out without handing them over at once.
INGESTION_IN_WORKERS = env.bool("INGESTION_IN_WORKERS", default=True)
INGESTION_JOIN_SECONDS = env.float("INGESTION_JOIN_SECONDS", default=2.0)
INGESTION_STATUS_EVERY_SECONDS = env.int("INGESTION_STATUS_EVERY_SECONDS", default=10)
# The bar builder's book is checkpointed with the cursor this often: a restarted worker
# restores it and replays the events since, instead of trusting a snapshot to be near.
INGESTION_BOOK_CHECKPOINT_SECONDS = env.int("INGESTION_BOOK_CHECKPOINT_SECONDS", default=60)
# Live exchange feeds (streaming/feeds.py, market/sources/venues/). Empty URL: the exchange's own.
BINANCE_WS_URL = env("BINANCE_WS_URL", default="")
BINANCE_REST_URL = env("BINANCE_REST_URL", default="")
# The request weight a process's depth snapshots spend a minute (Binance allows 6,000 per IP;
# two processes on one host at 2,400 each leave room for the rest). 0: no budget (a local
# exchange, as the benchmarks and tests run).
BINANCE_REST_WEIGHT_PER_MINUTE = env.float("BINANCE_REST_WEIGHT_PER_MINUTE", default=2400.0)
COINBASE_WS_URL = env("COINBASE_WS_URL", default="")
COINBASE_REST_URL = env("COINBASE_REST_URL", default="")
FEED_STALE_SECONDS = env.float("FEED_STALE_SECONDS", default=60.0)
FEED_IDLE_SECONDS = env.float("FEED_IDLE_SECONDS", default=45.0)
CELERY_BEAT_SCHEDULE = {
    "supervise-ingestion": {"task": "streaming.supervise_ingestion", "schedule": 10.0},
    "refresh-rankings": {"task": "market.refresh_rankings", "schedule": 6 * 3600.0},
    "purge-bars": {"task": "market.purge_bars", "schedule": 3600.0},
    "purge-scheme-events": {"task": "schemes.purge_events", "schedule": 3600.0},
    # PostgreSQL: the time partitions of the next days, made ahead of the writes
    # (market/partitions.py; a write still makes a missing one itself)
    "bar-partitions-upkeep": {"task": "market.bar_partitions_upkeep", "schedule": 3600.0},
    "scheme-event-partitions-upkeep": {"task": "schemes.event_partitions_upkeep", "schedule": 3600.0},
}
STREAM_READY_COVERAGE = env.float("STREAM_READY_COVERAGE", default=0.95)
STREAM_STALE_AFTER_SECONDS = env.int("STREAM_STALE_AFTER_SECONDS", default=30)
STREAM_FAILED_AFTER_SECONDS = env.int("STREAM_FAILED_AFTER_SECONDS", default=600)
SNAPSHOT_STREAM_ROWS = env.int("SNAPSHOT_STREAM_ROWS", default=5000)
SNAPSHOT_PAGE_ROWS = env.int("SNAPSHOT_PAGE_ROWS", default=5000)

# Live SSE feed (streaming/sse.py).
SSE_TOKEN_SECONDS = env.int("SSE_TOKEN_SECONDS", default=300)
SSE_KEEPALIVE_SECONDS = env.float("SSE_KEEPALIVE_SECONDS", default=15.0)
SSE_RETRY_MS = env.int("SSE_RETRY_MS", default=3000)
# How often a serving process re-checks the grants of its open streams (key, payment, plan,
# subscription): the bound on closing them after a change made by another process.
SSE_GRANT_RECHECK_SECONDS = env.float("SSE_GRANT_RECHECK_SECONDS", default=0.5)
SSE_REPLAY_MAX_SECONDS = env.int("SSE_REPLAY_MAX_SECONDS", default=3600)
# Threads that authorise stream connects (each waits on a few database and cache round
# trips, not on the CPU): more than the default executor's few, fewer than the database pool.
SSE_CONNECT_THREADS = env.int("SSE_CONNECT_THREADS", default=12)

# Scheme detection (schemes/).
SCHEMES_RETENTION_HOURS = env.int("SCHEMES_RETENTION_HOURS", default=720)
SCHEMES_DETECTION = env.bool("SCHEMES_DETECTION", default=True)
SCHEMES_WARMUP_MINUTES = env.int("SCHEMES_WARMUP_MINUTES", default=30)
# Depth streams that net their updates, per exchange slug: Binance's @depth@100ms, Coinbase's
# level2_batch. The detectors match a level's decrease with the trades of that window.
DEPTH_BATCH_MS = {"binance": 100, "coinbase": 50}

# Payments through Stripe (billing/payments.py). Without a secret key the plan page says
# upgrading is arranged with staff, and staff set the standing in admin.
STRIPE_SECRET_KEY = env("STRIPE_SECRET_KEY", default="")
STRIPE_WEBHOOK_SECRET = env("STRIPE_WEBHOOK_SECRET", default="")
STRIPE_API_BASE = env("STRIPE_API_BASE", default="")  # empty: Stripe's own; a stub or stripe-mock in tests
STRIPE_WEBHOOK_TOLERANCE_SECONDS = env.int("STRIPE_WEBHOOK_TOLERANCE_SECONDS", default=300)
