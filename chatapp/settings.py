"""Settings, read from the environment. A bad value stops start-up with a message naming the variable.

Embedded defaults (no variables set): SQLite file under var/, a filesystem Celery broker under var/,
a generated secret key and encryption key kept in var/ — a single-machine install that needs no
server. DATABASE_URL and REDIS_URL switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured

from chatapp.env import comma_list, env_bool, env_int, env_list, env_rate, env_str
from chatapp.env_celery import env_queue, visibility_timeout_checked
from chatapp.env_urls import redis_next_database, redis_url_checked, sqlite_path_checked, text_redacted, url_redacted
from chatapp.instance import ENCRYPTION_KEY_FILE, SECRET_FILE, secret_read, var_dir

BASE_DIR = Path(__file__).resolve().parent.parent
# Settings read and never write: var/ and its secrets are made by chatapp.instance.instance_prepare,
# which every entry point (manage.py, the ASGI app, the Celery app) calls before Django starts.
VAR_DIR = var_dir()
if not VAR_DIR.is_absolute():  # each process (web server, worker) would find it from its own working directory
    raise ImproperlyConfigured(f"CHATAPP_VAR_DIR must be an absolute path, got {str(VAR_DIR)!r}")


# Empty until the instance is prepared (then Django refuses to start: "SECRET_KEY must not be empty").
# Set but blank (" ", ","): no key, said now rather than met as a 500 when a key is first used.
if os.environ.get("SECRET_KEY") and not os.environ["SECRET_KEY"].strip():
    raise ImproperlyConfigured("SECRET_KEY is set but blank: give a secret, or unset it to use the one in var/")
if os.environ.get("FIELD_ENCRYPTION_KEY") and not comma_list(os.environ["FIELD_ENCRYPTION_KEY"]):
    raise ImproperlyConfigured(
        "FIELD_ENCRYPTION_KEY is set but holds no key: give one or more Fernet keys, comma-separated, "
        "or unset it to use the one in var/"
    )
SECRET_KEY = secret_read("SECRET_KEY", SECRET_FILE)
# Fernet key(s) for API keys at rest; a comma-separated list rotates (first encrypts, all decrypt).
FIELD_ENCRYPTION_KEYS = comma_list(secret_read("FIELD_ENCRYPTION_KEY", ENCRYPTION_KEY_FILE))
try:
    from cryptography.fernet import Fernet

    for _k in FIELD_ENCRYPTION_KEYS:
        Fernet(_k.encode())
except ValueError as exc:
    raise ImproperlyConfigured(f"FIELD_ENCRYPTION_KEY is not a valid Fernet key: {exc}") from None

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = comma_list(os.environ.get("CSRF_TRUSTED_ORIGINS", ""))
for _origin in CSRF_TRUSTED_ORIGINS:
    if urlparse(_origin).scheme not in {"http", "https"}:
        raise ImproperlyConfigured(f"CSRF_TRUSTED_ORIGINS entries need a scheme, got {_origin!r}")

# Served over HTTPS (production): one switch for what `manage.py check --deploy` asks. Off by
# default, since the local set-up is plain http://localhost and would lock itself out.
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# A form sent from a page opened before its user signed in or out elsewhere: the app's page, not Django's.
CSRF_FAILURE_VIEW = "chatapp.chat.account_pages.csrf_failure"
# Behind a TLS-terminating proxy (nginx, a load balancer) that sets X-Forwarded-Proto: trust it only
# when told to, since a client could send the header itself to a server facing it directly.
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)
if BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    # Before django.contrib.auth: its `changepassword` command (which also revokes the API tokens)
    # takes the place of Django's.
    "chatapp.chat",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "chatapp.providers",
    "chatapp.dashboard",
]

MIDDLEWARE = [
    # Async only, first: chat turn starts wait in line on the event loop (TURN_START_CONCURRENCY),
    # not in 200 threads; with sync_stack_end, last, the middlewares between run in one thread per
    # request instead of hopping between the event loop and threads (admission.py says why).
    "chatapp.chat.admission.admission_middleware",
    "django.middleware.security.SecurityMiddleware",
    # a Content-Security-Policy on every HTML response that does not set its own
    "chatapp.chat.csp.csp_middleware",
    "chatapp.static_files.WholeFileWhiteNoiseMiddleware",  # WhiteNoise, without streaming a file (why: there)
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's, but an API address without its final slash is a JSON 404, not a redirect (not_found.py).
    "chatapp.chat.api.not_found.PageCommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "chatapp.chat.admission.sync_stack_end",
]
MESSAGE_STORAGE = "chatapp.chat.flash_storage.LazyFallbackStorage"  # built only when used: flash_storage says why
ROOT_URLCONF = "chatapp.urls"

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

ASGI_APPLICATION = "chatapp.asgi.application"

# --- Database -------------------------------------------------------------------------------
# Set but blank (`DATABASE_URL=` in a compose file): the default, as with every variable (chatapp.env).
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'chatapp.sqlite3'}")
try:
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
except ValueError as exc:
    raise ImproperlyConfigured(
        f"DATABASE_URL {url_redacted(DATABASE_URL)!r} is not a database URL this app supports: "
        f"{text_redacted(str(exc), DATABASE_URL)}"
    ) from None
if DATABASES["default"]["ENGINE"] not in {"django.db.backends.sqlite3", "django.db.backends.postgresql"}:
    raise ImproperlyConfigured(
        f"DATABASE_URL names {DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}: this app runs on PostgreSQL "
        "(postgres://...) or SQLite (sqlite:////absolute/path.sqlite3)"
    )
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    sqlite_path_checked(DATABASES["default"]["NAME"])
    # Django's backend, keeping the connections requests close for the next ones (chatapp/sqlite3).
    DATABASES["default"]["ENGINE"] = "chatapp.sqlite3"
    # WAL lets the web server read while the worker writes a summary.
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update(
        # synchronous=NORMAL: in WAL mode a commit no longer waits for an fsync (the database stays
        # consistent; only the last commits can be lost on power failure) — a chat turn commits twice
        # before its first byte, and an fsync each took longer than the rest of the request.
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "pool_size": env_int("DATABASE_POOL_SIZE", 10, minimum=0),
        }
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A connection pool: opening a PostgreSQL connection per request cost ~6 ms of a ~30 ms budget
    # to the first streamed byte (bench/web_ttfb.py).
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": env_int("DATABASE_POOL_SIZE", 10, minimum=1),
        "timeout": 10,
    }
EMBEDDED_MODE = DATABASES["default"]["ENGINE"] == "chatapp.sqlite3"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery -----------------------------------------------------------------------------------
REDIS_URL = redis_url_checked("REDIS_URL", env_str("REDIS_URL", ""))
CELERY_BROKER_DIR = VAR_DIR / "celery-broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
        # A message whose worker died unacked is redelivered after this many seconds (acks_late);
        # tests shorten it. It must exceed the longest retry backoff (checked below the backoff's setting).
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1),
        "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL", 10, minimum=1),
        "unacked_restore_throttle": env_int("CELERY_UNACKED_RESTORE_THROTTLE", 10, minimum=1),
        # An unreachable broker must fail an enqueue fast: the chat answers and the job stays pending.
        "socket_connect_timeout": env_int("CELERY_BROKER_CONNECT_TIMEOUT", 3, minimum=1),
        # And a broker that accepts the connection but never answers (hung, or a black hole past a
        # proxy): without a read timeout a publish waits forever, and with it every request queued
        # behind it on the web process's one background thread (summary_requests).
        "socket_timeout": env_int("CELERY_BROKER_SOCKET_TIMEOUT", 10, minimum=2),
    }
    # kombu takes a rediss:// broker without ssl_cert_reqs on any certificate (CERT_NONE): verify it
    # unless the URL says otherwise (its own ssl_* parameters replace these).
    if urlparse(REDIS_URL).scheme == "rediss":
        CELERY_BROKER_USE_SSL = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
else:
    # A broker that needs no server: kombu's filesystem transport, shared by web and worker on one machine
    # (its folders are made by instance_prepare), in chatapp.fs_broker's version that loses no message.
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT = "chatapp.fs_broker.Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "out"),
        "data_folder_out": str(CELERY_BROKER_DIR / "out"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        # Fanout (worker control) exchanges; kombu's default is a "control" folder in the cwd.
        "control_folder": str(CELERY_BROKER_DIR / "control"),
        "store_processed": False,
        # How often an idle worker looks for new messages in the folder.
        "polling_interval": env_int("CELERY_POLLING_INTERVAL_MS", 250, minimum=10) / 1000,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_CONCURRENCY = env_int("CELERY_CONCURRENCY", 2, minimum=1)
CELERY_SUMMARY_QUEUE = env_queue("CELERY_SUMMARY_QUEUE", "summaries")
# Summary jobs run minutes, not milliseconds: take one message at a time so a busy worker does not
# hold messages another worker could run.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Issue 4 (summary jobs). Retries on 429/5xx/timeouts: exponential backoff with jitter (half fixed, half random).
SUMMARY_MAX_RETRIES = env_int("SUMMARY_MAX_RETRIES", 3)
SUMMARY_RETRY_BACKOFF_MS = env_int("SUMMARY_RETRY_BACKOFF_MS", 2000, minimum=1)
SUMMARY_RETRY_BACKOFF_MAX_MS = env_int("SUMMARY_RETRY_BACKOFF_MAX_MS", 60_000, minimum=1)
if REDIS_URL:  # the filesystem broker has no visibility timeout
    visibility_timeout_checked(CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"],
                               backoff_max_ms=SUMMARY_RETRY_BACKOFF_MAX_MS)
# A running job whose worker has not finished within the lease may be taken over (worker died).
SUMMARY_JOB_LEASE_SECONDS = env_int("SUMMARY_JOB_LEASE_SECONDS", 300, minimum=1)
# A queued job still unclaimed after this long has its message published again (it may be lost).
SUMMARY_QUEUED_STALE_SECONDS = env_int("SUMMARY_QUEUED_STALE_SECONDS", 900, minimum=1)
# The periodic sweep publishes pending jobs (broker was down) and stale ones.
SUMMARY_SWEEP_INTERVAL_SECONDS = env_int("SUMMARY_SWEEP_INTERVAL_SECONDS", 60, minimum=1)
# A "compact now?" question left unanswered this long is dropped so automatic jobs can ask again.
SUMMARY_AWAITING_EXPIRY_SECONDS = env_int("SUMMARY_AWAITING_EXPIRY_SECONDS", 86_400, minimum=1)
# Manual compaction keeps this many newest rounds verbatim and summarizes the rest.
SUMMARY_MANUAL_KEEP_ROUNDS = env_int("SUMMARY_MANUAL_KEEP_ROUNDS", 2, minimum=1)

# --- Cache ---------------------------------------------------------------------------------------
# The per-user send rate limit and the API throttles count in the cache, so every web process must
# see the same one: with Redis configured the cache is there — CACHE_URL, or by default REDIS_URL's
# server with the next database number (the broker's own database is never flushed by a cache clear).
# Without Redis (the embedded mode: one web process) it is the process's memory.
CACHE_URL = redis_url_checked("CACHE_URL", env_str("CACHE_URL", "")) or (
    redis_next_database(REDIS_URL) if REDIS_URL else ""
)
if CACHE_URL:
    # Django's backend with one connection pool per process, not per request (chatapp/redis_cache.py).
    CACHES = {"default": {"BACKEND": "chatapp.redis_cache.RedisCache", "LOCATION": CACHE_URL}}

# --- Auth -------------------------------------------------------------------------------------
# Sign-up refuses a name that differs from another only by case; sign-in reads names the same way.
# ModelBackend stays for the sessions it signed in (a session names its backend): chat/auth_backend.py.
AUTHENTICATION_BACKENDS = [
    "chatapp.chat.auth_backend.UsernameAnyCaseBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat-home"
LOGOUT_REDIRECT_URL = "login"

# --- REST framework ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an unauthenticated API call then gets 401 with WWW-Authenticate, not 403.
        "chatapp.chat.api.auth.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # drf-spectacular's, naming each view's nested Input/OutputSerializer after the view.
    "DEFAULT_SCHEMA_CLASS": "chatapp.chat.api.schema.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    # Services raise Django ValidationError; this answers it as a DRF 400 with field errors.
    "EXCEPTION_HANDLER": "chatapp.chat.api.errors.api_exception_handler",
    # Per user (per client address for the token endpoint), in the cache (shared through CACHE_URL):
    # a 429 with Retry-After beyond.
    # Throttles key anonymous clients by address: only the proxy's own X-Forwarded-For entry counts
    # (a client can write the header itself; with no proxy in front, the socket's address).
    "NUM_PROXIES": 1 if BEHIND_TLS_PROXY else 0,
    "DEFAULT_THROTTLE_RATES": {
        "auth_token": env_rate("THROTTLE_AUTH_TOKEN", "10/min"),
        "config_test": env_rate("THROTTLE_CONFIG_TEST", "20/min"),
        "compact": env_rate("THROTTLE_COMPACT", "10/min"),
        # Failed sign-ins on the login page (chat/login_throttle.py), per client address and per username.
        "login_address": env_rate("THROTTLE_LOGIN_ADDRESS", "20/hour"),
        "login_username": env_rate("THROTTLE_LOGIN_USERNAME", "50/hour"),
        # Accounts made on the sign-up page, per client address (login_throttle.signup_attempt_start).
        "signup_address": env_rate("THROTTLE_SIGNUP_ADDRESS", "10/hour"),
    },
    # JSON nesting is bounded (400) and bodies by DATA_UPLOAD_MAX_MEMORY_SIZE (413): see api/parsers.py.
    "DEFAULT_PARSER_CLASSES": [
        "chatapp.chat.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Long-context chat API",
    "DESCRIPTION": "Conversations, streamed replies, pins, model configs, settings and optimization records.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI's assets from the drf-spectacular-sidecar package: the docs work offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets of one name (status, kind) differ by model: each enum named after its own (no guessed
    # "StatusD4fEnum").
    "ENUM_NAME_OVERRIDES": {
        "ImportJobStatusEnum": "chatapp.chat.import_models.ImportJob.Status",
        "ImportJobKindEnum": "chatapp.chat.import_models.ImportJob.Kind",
    },
}

# --- Chat limits and model access -------------------------------------------------------------
MAX_MESSAGE_CHARS = env_int("MAX_MESSAGE_CHARS", 200_000, minimum=1)
# Images a message may carry (PNG, JPEG, WebP, GIF), each at most MAX_IMAGE_BYTES; 0 images: none taken.
MAX_IMAGE_BYTES = env_int("MAX_IMAGE_BYTES", 5_000_000, minimum=1024)
MAX_IMAGES_PER_MESSAGE = env_int("MAX_IMAGES_PER_MESSAGE", 4, minimum=0)
# Largest API request body: room for a message of MAX_MESSAGE_CHARS even if every character is sent
# as a 6-byte JSON escape, so a long message meets its own clear 413 (characters), not this one.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", MAX_MESSAGE_CHARS * 6 + 65_536, minimum=1024)
# A send's body from a signed-in sender (body_limit): room for its images too, base64 in the JSON (4
# characters per 3 bytes), so they meet their own limit (MAX_IMAGE_BYTES), not this one.
SEND_MAX_BODY_BYTES = API_MAX_BODY_BYTES + MAX_IMAGES_PER_MESSAGE * (MAX_IMAGE_BYTES * 4 // 3 + 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES
# A reply still "streaming" with no heartbeat (every 3 s) for this long lost its process: the periodic
# sweep finishes it as interrupted, with its checkpointed text.
STREAM_ORPHAN_SECONDS = env_int("STREAM_ORPHAN_SECONDS", 60, minimum=5)
# A web process stopped with SIGTERM lets the replies it streams go on this long (those whose page is
# open: uvicorn's --timeout-graceful-shutdown, which serve sets to it; then those whose page left), then
# stores the rest as interrupted (chatapp.chat.lifespan).
SHUTDOWN_GRACE_SECONDS = env_int("SHUTDOWN_GRACE_SECONDS", 10)
# A reply is cut (and marked) past this many characters: a runaway cannot fill the database or page.
MAX_REPLY_CHARS = env_int("MAX_REPLY_CHARS", 1_000_000, minimum=1000)
# Chat turns that may be prepared at once per web process (ASGI); more wait in line, so that a burst
# of sends cannot take the CPU and the connection pool from everyone else's requests.
TURN_START_CONCURRENCY = env_int("TURN_START_CONCURRENCY", 4, minimum=1)
SEND_RATE_LIMIT_PER_MINUTE = env_int("SEND_RATE_LIMIT_PER_MINUTE", 20, minimum=1)
LLM_TIMEOUT_SECONDS = env_int("LLM_TIMEOUT_SECONDS", 120, minimum=1)
# API tokens stop working this many days after they are created (Settings lists and revokes them).
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 30, minimum=1)
# A summary's model call: shorter than a chat reply's, since it holds a worker shared by all users.
SUMMARY_TIMEOUT_SECONDS = env_int("SUMMARY_TIMEOUT_SECONDS", 60, minimum=1)
# A user's next summary job waits this long while one of theirs is running (one at a time per user).
SUMMARY_USER_WAIT_SECONDS = env_int("SUMMARY_USER_WAIT_SECONDS", 5, minimum=1)
# A streamed reply sends an SSE comment after this many silent seconds (a model thinking), so
# proxies and load balancers with idle timeouts do not cut the stream.
SSE_KEEPALIVE_SECONDS = env_int("SSE_KEEPALIVE_SECONDS", 15, minimum=1)
# User-supplied base URLs are an SSRF vector in a shared deployment: private, loopback and
# link-local targets are refused unless allowed. The embedded single-machine mode allows them so a
# local Ollama works.
ALLOW_PRIVATE_LLM_URLS = env_bool("ALLOW_PRIVATE_LLM_URLS", EMBEDDED_MODE)
SUMMARIES_PER_DAY = env_int("SUMMARIES_PER_DAY", 3, minimum=0)
# Conversation imports (import_services): the largest file accepted (a ZIP's conversations.json is
# bounded the same, unpacked) — the worker holds the file's bytes plus one conversation's objects —
# and the queue their jobs go to (Celery's default queue, beside the summaries one).
IMPORT_MAX_BYTES = env_int("IMPORT_MAX_BYTES", 200_000_000, minimum=1024)
CELERY_IMPORT_QUEUE = env_queue("CELERY_IMPORT_QUEUE", "celery")
# Settings → Prompts' import reads its file whole in the request (no worker): its own, smaller limit,
# room for 200 prompts of 100,000 bytes each.
PROMPTS_FILE_MAX_BYTES = env_int("PROMPTS_FILE_MAX_BYTES", 20_000_000, minimum=1024)
# A running import not heard from for this long is taken over by a redelivery (its worker died).
IMPORT_LEASE_SECONDS = env_int("IMPORT_LEASE_SECONDS", 300, minimum=1)

# --- i18n / static ----------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# Serve static/ from the source tree as well, so a fresh checkout works without collectstatic.
WHITENOISE_USE_FINDERS = True

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # httpx logs every model request at INFO; URLs only, but noise on every chat turn.
    "loggers": {"httpx": {"level": "WARNING"}},
}
