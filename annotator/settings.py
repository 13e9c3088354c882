"""The one settings module: every knob comes from the environment, with a safe local default.

Local use (DEBUG=1) needs nothing running: SQLite and kombu's filesystem broker live under var/ and a
secret key is generated there once. Production sets DEBUG=0, SECRET_KEY, DATABASE_URL, CELERY_BROKER_URL
and ALLOWED_HOSTS, and passes `manage.py check --deploy`.
"""
import json
import os
import re
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name}={value!r} is not a finite number")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)

# Local state (SQLite file, filesystem broker, generated secret key) lives here, never in the code tree.
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _local_secret_key() -> str:
    path = VAR_DIR / "secret_key"
    try:
        # Created 0600 in one step (never readable by others, whatever the umask), and only if absent: a process
        # starting at the same time reads the key this one wrote instead of replacing it with its own.
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    with os.fdopen(handle, "w") as out:
        out.write(key)
    return key


SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set it in the environment, or set DEBUG=1 for local use "
            "(a key is then generated once into var/secret_key)."
        )
    SECRET_KEY = _local_secret_key()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "template_partials",
    "axes",
    "labeling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "labeling.api.middleware.RefuseNulMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "annotator.middleware.ContentSecurityPolicyMiddleware",
    # Last, as django-axes requires: it turns a login it refused into the lockout page on the way out.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "annotator.urls"
WSGI_APPLICATION = "annotator.wsgi.application"

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

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'annotator.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server and a worker write to one file: wait for the lock instead of failing, and take the
    # write lock at BEGIN so two writers never deadlock upgrading read locks.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # The test database is a file, not memory: the integration tests start real Celery workers as separate
    # processes, which must see the rows the test wrote.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
elif os.environ.get("DATABASE_TEST_NAME"):
    # Two test runs against one PostgreSQL server each need their own test database.
    DATABASES["default"]["TEST"] = {"NAME": os.environ["DATABASE_TEST_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "labeling:project_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Large files (passage embeddings; adapters and indexes as they come) go through the default storage: every
# worker must see the same one, so a deployment on several machines points MEDIA_ROOT at a shared volume (or
# replaces the backend).
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
# Stored files (uploads, releases, the Systems pickles, embeddings, adapters) are the service account's alone: every
# web and worker process runs as that one account (docs/operations.md). Django's default would be 0644 and 0755.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Local runs serve straight from static/ (no collectstatic needed); production serves the collected,
# hashed and compressed copies.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
if DEBUG:
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}

# Security: safe by default; DEBUG relaxes only what plain-http localhost needs.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Sent on every response by annotator.middleware: scripts and styles only from our own static files (no
# inline <script>, style= or on*= handlers in the templates), nothing framed, no plugins.
CSP_POLICY = env_str(
    "CSP_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'self'; frame-ancestors 'none'; form-action 'self'",
)
# Debug pages and error reports list settings and request.META (under runserver, the whole environment): connection
# strings such as DATABASE_URL and CELERY_BROKER_URL carry passwords, so names with URL, DSN, DATABASE or BROKER
# are masked as well as Django's KEY, SECRET, PASS... (annotator/debug.py).
DEFAULT_EXCEPTION_REPORTER_FILTER = "annotator.debug.ConnectionStringFilter"

# Login throttling (django-axes). Every failed password check (/accounts/login/, /admin/login/, /api/token/) is
# counted in the database, so the count holds across web processes and machines. Once an account, or a client
# address, has LOGIN_FAILURE_LIMIT failures younger than LOGIN_COOLOFF_MINUTES, its logins are answered 429 (a
# page, or JSON from the API) until the newest of them is that old. The axes backend refuses before ModelBackend,
# so a locked login hashes no password, and refused logins neither count nor extend the wait. A successful login
# forgives the failures of that account from that address only (labeling/login_throttle.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "labeling.login_throttle.LoginAttemptHandler"
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own: per account and per address
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
if AXES_FAILURE_LIMIT < 1 or AXES_COOLOFF_TIME < timedelta(minutes=1):
    raise ImproperlyConfigured("LOGIN_FAILURE_LIMIT and LOGIN_COOLOFF_MINUTES must be at least 1")
AXES_RESET_ON_SUCCESS = True
# No "AXES: BEGIN" banner on every command and no line per login: commands print only what they are asked for.
AXES_VERBOSE = False
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "labeling.login_throttle.lockout_page"
AXES_CLIENT_IP_CALLABLE = "labeling.login_throttle.client_address"

# Invitations (a project admin brings an expert in by a one-time link): how long a link stays valid. The link
# is shown once to the admin; it is also e-mailed when EMAIL_BACKEND names a backend (with EMAIL_HOST, EMAIL_PORT,
# EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS for SMTP); empty: no e-mail is sent.
INVITATION_DAYS = env_int("INVITATION_DAYS", 7)
if INVITATION_DAYS < 1:
    raise ImproperlyConfigured(f"INVITATION_DAYS={INVITATION_DAYS} must be at least 1")
INVITATION_EMAIL = bool(env_str("EMAIL_BACKEND"))
EMAIL_BACKEND = env_str("EMAIL_BACKEND") or "django.core.mail.backends.locmem.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "annotator@localhost")
# Behind a reverse proxy every connection comes from the proxy, which would lock everybody out together: name
# the header it puts the client's address in (X-Forwarded-For, X-Real-IP); its last address is used, the one the
# proxy added. Empty: the connection's address (REMOTE_ADDR). Only when the proxy is the only way in.
LOGIN_CLIENT_IP_HEADER = env_str("LOGIN_CLIENT_IP_HEADER")

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated request with the first class's challenge, so a missing or bad
    # token is 401 with `WWW-Authenticate: Token` (session-only would make it 403). A logged-in browser still works.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # JSON bodies only; the upload endpoints (bundles, runs, training-set files) read multipart themselves.
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "labeling.api.schema.AnnotatorAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": env_int("API_PAGE_SIZE", 100),
    # One error body for every error (labeling/api/exceptions.py).
    "EXCEPTION_HANDLER": "labeling.api.exceptions.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "annotator API",
    "DESCRIPTION": "Relevance-judgment projects: queries, passages, pairs, human labels and LLM judgments.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Login is required everywhere; drf-spectacular would serve the schema to anyone.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # The `<id:...>` path converter (labeling.ids): a database id, 1 to 2**63 - 1.
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}},
    # Two fields named `kind` (a run's, an audit's) hold different choices: each enum gets its own name.
    "ENUM_NAME_OVERRIDES": {"AuditKindEnum": "labeling.models.audit.AuditKind",
                            # A fine-tuning request's `student` and a job's `student_kind`: one enum.
                            "StudentKindEnum": "labeling.models.finetune.FineTuneJob.StudentKind"},
    # Request bodies get their own components (a file field is binary there, a URL in a response).
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation's error answers and the one error body (labeling/api/schema.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "labeling.api.schema.document_errors"],
}

# Celery: Redis in production; with no broker configured, kombu's filesystem transport under var/ lets a
# real worker run with no server. Web and workers share state only through the database and the broker.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT = "annotator.broker:Transport"  # atomic message files (see annotator/broker.py)
    _broker_dir = Path(env_str("CELERY_BROKER_DIR", str(VAR_DIR / "celery-broker")))
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # kombu's default is ./control, relative to wherever the process was started.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Redis hands an unacknowledged message (its worker died) to another worker after this many seconds. Set
    # explicitly and longer than any chunk takes: the scoring sweep, not the broker, brings a lost chunk back.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Queues by kind of work (docs/operations.md, "Queues"): interactive work that someone waits for (bundle imports,
# validation refreshes, definition drafts, the sweep) never waits behind bulk work (scoring chunks, retrieval,
# audits, fine-tuning). Production runs separate worker pools per queue; `make demo` runs one worker per queue. With
# GPU_QUEUE set, fine-tuning and the chunks and audits of judges that run a local model on a GPU (device cuda...) go
# there, to the GPU workers, and nowhere else. A worker started without -Q consumes every queue below.
INTERACTIVE_QUEUE = env_str("INTERACTIVE_QUEUE", "interactive")
BULK_QUEUE = env_str("BULK_QUEUE", "bulk")
GPU_QUEUE = env_str("GPU_QUEUE", "")
FINETUNE_QUEUE = env_str("FINETUNE_QUEUE", GPU_QUEUE or BULK_QUEUE)
CELERY_TASK_DEFAULT_QUEUE = INTERACTIVE_QUEUE
CELERY_TASK_QUEUES = [Queue(name) for name in dict.fromkeys(
    [INTERACTIVE_QUEUE, BULK_QUEUE, FINETUNE_QUEUE, *([GPU_QUEUE] if GPU_QUEUE else [])])]
CELERY_TASK_ROUTES = {
    **{f"labeling.tasks.{name}": {"queue": INTERACTIVE_QUEUE} for name in (
        "bundle_import_task", "validation_refresh_task", "definition_draft_task", "jobs_sweep_task",
        "round_finish_task", "systems_refresh_task")},
    **{f"labeling.tasks.{name}": {"queue": BULK_QUEUE} for name in (
        "score_chunk_task", "retrieval_task", "audit_task", "query_generation_task", "estimate_task",
        "replay_task")},
    "labeling.tasks.finetune_task": {"queue": FINETUNE_QUEUE},
}
# A project keeps SCORING_WINDOW_CHUNKS of its scoring chunks in each queue at a time (times the highest priority, 1
# to 10, among its running jobs there), however many jobs it runs, and sends the next when one is written: projects
# running together share the bulk workers in turn, and a project's jobs share its turns by priority. A job of chunks
# shorter than SCORING_CHUNK_SECONDS has proportionally more sent (up to 16 times), so the turns are shares of time.
# Set it to at least the number of bulk worker processes, or one project alone leaves some of them idle.
SCORING_WINDOW_CHUNKS = env_int("SCORING_WINDOW_CHUNKS", 8)
if SCORING_WINDOW_CHUNKS < 1:
    raise ImproperlyConfigured(f"SCORING_WINDOW_CHUNKS={SCORING_WINDOW_CHUNKS} must be at least 1")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"expected_forbidden": {"()": "annotator.log_filters.ExpectedForbidden"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"filters": ["expected_forbidden"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# Bundle import limits: a line longer than this is reported instead of read into memory.
IMPORT_MAX_LINE_BYTES = env_int("IMPORT_MAX_LINE_BYTES", 8 * 1024 * 1024)
# `import_bundle --all-pairs` refuses a pool larger than this (every query x every passage).
IMPORT_MAX_ALL_PAIRS = env_int("IMPORT_MAX_ALL_PAIRS", 5_000_000)
# A run file uploaded through the Systems page or the API: a larger request is refused before its body is read
# (bigger runs are imported on the server with `manage.py import_run`).
RUN_UPLOAD_MAX_BYTES = env_int("RUN_UPLOAD_MAX_BYTES", 512 * 1024 * 1024)
# A run file up to this size (a .gz: once decompressed) is read in the web request (about a second); a larger one is
# kept in the storage and stored as a run by a worker (a bundle import job of its own, on the Import page).
RUN_UPLOAD_INLINE_MAX_BYTES = env_int("RUN_UPLOAD_INLINE_MAX_BYTES", 16 * 1024 * 1024)
# A training file (DIRAS-layout CSV, capped by RUN_UPLOAD_MAX_BYTES) up to this size is read in the web request; a
# larger one is kept in the storage and stored as a training set by a worker (an import job on the Import page): its
# rows expand many times into prompts (a 4.4 MB file took 80 s and 0.9 GB).
TRAINING_SET_INLINE_MAX_BYTES = env_int("TRAINING_SET_INLINE_MAX_BYTES", 256 * 1024)
# A bundle archive (.zip, .tar.gz) uploaded through the pages or the API: a larger request is refused before its
# body is read (bigger bundles are imported on the server with `manage.py import_bundle`). Unpacking it stops at
# BUNDLE_EXPAND_MAX_BYTES in all (for a tar.gz, every byte gunzipped), BUNDLE_MAX_MEMBERS headers (skipped ones
# too), and a member or archive (zip) or stream (tar.gz) that expands more than BUNDLE_MAX_RATIO times its compressed
# size once past 1 MiB: archives are untrusted. The same two expansion limits hold for a .gz run file, uploaded alone
# or inside a bundle (`manage.py import_run` and `import_bundle` read the operator's own files without them).
BUNDLE_UPLOAD_MAX_BYTES = env_int("BUNDLE_UPLOAD_MAX_BYTES", 512 * 1024 * 1024)
BUNDLE_EXPAND_MAX_BYTES = env_int("BUNDLE_EXPAND_MAX_BYTES", 8 * 1024 * 1024 * 1024)
BUNDLE_MAX_MEMBERS = env_int("BUNDLE_MAX_MEMBERS", 10_000)
BUNDLE_MAX_RATIO = env_int("BUNDLE_MAX_RATIO", 200)
# A tar's extended header (pax, GNU long name) is read whole into memory: real ones hold a path of at most 4 KiB and
# a few times and names, well under this.
BUNDLE_MAX_HEADER_BYTES = env_int("BUNDLE_MAX_HEADER_BYTES", 64 * 1024)
# A worker unpacks an archive in a child process, so that a parser bomb costs it a bounded time and nothing else: the
# child is killed after BUNDLE_UNPACK_SECONDS of wall clock, stops after BUNDLE_UNPACK_CPU_SECONDS of CPU and may map
# at most BUNDLE_UNPACK_MEMORY_MB of memory. Measured: 300 MB of text unpack in 4 s of CPU with 25 MB mapped, so
# 8 GiB (the most BUNDLE_EXPAND_MAX_BYTES lets through) needs about 2 minutes.
BUNDLE_UNPACK_SECONDS = env_int("BUNDLE_UNPACK_SECONDS", 600)
BUNDLE_UNPACK_CPU_SECONDS = env_int("BUNDLE_UNPACK_CPU_SECONDS", 300)
BUNDLE_UNPACK_MEMORY_MB = env_int("BUNDLE_UNPACK_MEMORY_MB", 256)
# A fine-tuning job whose worker has not reported a step for this long is taken to be dead: `finetune_judge
# --resume` (or the page) queues it again, and the next worker goes on from its last checkpoint in storage.
FINETUNE_STALL_SECONDS = env_int("FINETUNE_STALL_SECONDS", 900)
# Where a worker keeps its local copy of stored adapters (fetched from the default storage once per machine).
ADAPTER_CACHE_DIR = Path(env_str("ADAPTER_CACHE_DIR", str(VAR_DIR / "adapter-cache")))
# A project's validation report is recomputed at most once per this many seconds: requests in between mark it
# stale, and the one queued recomputation runs when the interval is over.
VALIDATION_REFRESH_MIN_SECONDS = env_int("VALIDATION_REFRESH_MIN_SECONDS", 30)
# Pairs of one query per scoring task: big enough to reuse the query's prompt prefix, small enough that a
# killed worker loses little and progress moves.
SCORING_CHUNK_PAIRS = env_int("SCORING_CHUNK_PAIRS", 32)
# ...or fewer for a judge whose measured speed would make a chunk take longer than this many seconds: jobs share the
# workers chunk by chunk, so chunks of similar length share them by time.
SCORING_CHUNK_SECONDS = env_float("SCORING_CHUNK_SECONDS", 30.0)
# ...and up to this many for an embedding judge, which encodes each distinct text of a chunk once: the demo's 7,136
# pairs in 16 chunks of one query each rather than 223 of 32, each with its own turn, claim and write.
SCORING_EMBEDDING_CHUNK_PAIRS = env_int("SCORING_EMBEDDING_CHUNK_PAIRS", 512)
# Pairs a chunk scores between two writes: what a killed worker can lose, and how often a chunk shows it lives.
SCORING_WRITE_PAIRS = env_int("SCORING_WRITE_PAIRS", 8)
# A chunk whose worker shows no sign of life for this long is taken back by the sweep and queued again...
SCORING_STALL_SECONDS = env_int("SCORING_STALL_SECONDS", 600)
# ...unless it has lost its worker this many times: then its unwritten pairs are failed with that reason.
SCORING_CHUNK_MAX_ATTEMPTS = env_int("SCORING_CHUNK_MAX_ATTEMPTS", 3)
# Robustness audits (docs/robustness.md): probes per call of the judge's scorer (how often progress is written),
# the most gold pairs one perturbation audit samples, and the sampling temperature of its self-consistency test.
AUDIT_BATCH = env_int("AUDIT_BATCH", 16)
AUDIT_MAX_SAMPLE = env_int("AUDIT_MAX_SAMPLE", 5000)
AUDIT_TEMPERATURE = env_float("AUDIT_TEMPERATURE", 0.7)
# Every kind of background work, one rule (labeling/services/job_sweep.py, docs/operations.md "Jobs that stop"): a
# worker writes its job's heartbeat every JOB_HEARTBEAT_SECONDS; Celery beat runs the sweep every JOB_SWEEP_SECONDS
# (SCORING_SWEEP_SECONDS before), which gives up a running job whose heartbeat is older than its stall time
# (JOB_STALL_SECONDS; scoring's chunks SCORING_STALL_SECONDS, fine-tuning FINETUNE_STALL_SECONDS, both of which go
# on instead) or that started longer ago than its kind's hard time limit below (in seconds). On a prefork worker
# Celery also stops the task itself at that limit. Each job keeps its local files in a folder of its own under
# JOB_SCRATCH_DIR, removed when it ends; a worker starting removes the folders of jobs that no longer run.
JOB_HEARTBEAT_SECONDS = env_float("JOB_HEARTBEAT_SECONDS", 30.0)
JOB_STALL_SECONDS = env_int("JOB_STALL_SECONDS", 600)
JOB_SWEEP_SECONDS = env_int("JOB_SWEEP_SECONDS", env_int("SCORING_SWEEP_SECONDS", 60))
JOB_SCRATCH_DIR = Path(env_str("JOB_SCRATCH_DIR", str(VAR_DIR / "scratch")))
SCORING_TIME_LIMIT = env_int("SCORING_TIME_LIMIT", 30 * 24 * 3600)
RETRIEVAL_TIME_LIMIT = env_int("RETRIEVAL_TIME_LIMIT", 24 * 3600)
FINETUNE_TIME_LIMIT = env_int("FINETUNE_TIME_LIMIT", 7 * 24 * 3600)
AUDIT_TIME_LIMIT = env_int("AUDIT_TIME_LIMIT", 3 * 24 * 3600)
BUNDLE_IMPORT_TIME_LIMIT = env_int("BUNDLE_IMPORT_TIME_LIMIT", 6 * 3600)
# A validation recomputation past this lost its worker, or is hopeless: the next request queues a new one.
VALIDATION_TIME_LIMIT = env_int("VALIDATION_TIME_LIMIT", env_int("VALIDATION_STALL_SECONDS", 1800))
DRAFT_TIME_LIMIT = env_int("DRAFT_TIME_LIMIT", 15 * 60)
ROUND_TIME_LIMIT = env_int("ROUND_TIME_LIMIT", 3600)
# An estimate on a worker (labeling/services/estimates.py): loading a judge's, an encoder's or a base model and timing
# it on a few pairs or training steps; past this the page says it gave up, instead of waiting as a web request did
# (18 minutes for SmolLM2).
ESTIMATE_TIME_LIMIT = env_int("ESTIMATE_TIME_LIMIT", 10 * 60)
# LLM query generation (DisastIR 3.4; labeling/services/query_generation.py): two model calls per passage and intent.
QUERY_GENERATION_TIME_LIMIT = env_int("QUERY_GENERATION_TIME_LIMIT", 24 * 3600)
# The most passage x intent units one generation job may ask for (DisastIR generated 9,600 queries).
QUERY_GENERATION_MAX_UNITS = env_int("QUERY_GENERATION_MAX_UNITS", 20_000)
# A replay of the labelling loop (#50, labeling/services/replay.py): seeds x mixes x judges runs of the engine.
REPLAY_TIME_LIMIT = env_int("REPLAY_TIME_LIMIT", 6 * 3600)
# The Systems page's evaluation (labeling/services/systems_cache.py): computed by a worker within this time, at most
# once per SYSTEMS_REFRESH_MIN_SECONDS for one choice of sources and options, and within the request instead when
# the project's runs hold at most SYSTEMS_INLINE_ENTRIES entries in all (well under a second to compute).
SYSTEMS_TIME_LIMIT = env_int("SYSTEMS_TIME_LIMIT", 3600)
SYSTEMS_REFRESH_MIN_SECONDS = env_int("SYSTEMS_REFRESH_MIN_SECONDS", 30)
SYSTEMS_INLINE_ENTRIES = env_int("SYSTEMS_INLINE_ENTRIES", 200_000)
# At most this many of a project's choices are pending or running at once on the interactive queue (which imports,
# validation refreshes and the sweep share): past it a request for another is refused as busy and queues nothing.
SYSTEMS_MAX_PENDING = env_int("SYSTEMS_MAX_PENDING", 4)
if SYSTEMS_MAX_PENDING < 1:
    raise ImproperlyConfigured(f"SYSTEMS_MAX_PENDING={SYSTEMS_MAX_PENDING} must be at least 1")
for _name in ("JOB_STALL_SECONDS", "JOB_SWEEP_SECONDS", "SCORING_TIME_LIMIT", "RETRIEVAL_TIME_LIMIT",
              "FINETUNE_TIME_LIMIT", "AUDIT_TIME_LIMIT", "BUNDLE_IMPORT_TIME_LIMIT", "VALIDATION_TIME_LIMIT",
              "DRAFT_TIME_LIMIT", "ROUND_TIME_LIMIT", "SYSTEMS_TIME_LIMIT", "QUERY_GENERATION_TIME_LIMIT",
              "ESTIMATE_TIME_LIMIT", "REPLAY_TIME_LIMIT"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name}={globals()[_name]} must be at least 1 (seconds)")
if not 0 < JOB_HEARTBEAT_SECONDS * 3 <= JOB_STALL_SECONDS:
    raise ImproperlyConfigured(f"JOB_HEARTBEAT_SECONDS={JOB_HEARTBEAT_SECONDS:g} must be above 0 and at most a third "
                               f"of JOB_STALL_SECONDS={JOB_STALL_SECONDS}: a live worker would be taken for dead")
CELERY_BEAT_SCHEDULE = {
    "jobs-sweep": {"task": "labeling.tasks.jobs_sweep_task", "schedule": float(JOB_SWEEP_SECONDS)},
}


def _llm_endpoints(raw: str) -> dict[str, dict]:
    """LLM_ENDPOINTS: a JSON object naming each OpenAI-compatible endpoint a judge may use, e.g.
    {"openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"},
     "local": {"base_url": "http://127.0.0.1:8001/v1", "allow_local": true, "prefill": true}}.
    Judges name an endpoint; nobody but the operator types a URL or the variable that holds a key. `prefill`
    declares that the server continues a final assistant message (vLLM's continue_final_message).
    `label_token_ids`, {"Yes": [ids], "No": [ids]}, declares that the server returns the logprobs of named token
    ids (vLLM's logprob_token_ids) and which ids spell Yes and No in the served model's tokenizer: the backend
    has no tokenizer, so only the operator can say."""
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"LLM_ENDPOINTS is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured("LLM_ENDPOINTS must be a JSON object of endpoint name -> {base_url, ...}")
    endpoints = {}
    for name, entry in value.items():
        where = f"LLM_ENDPOINTS[{name!r}]"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
            raise ImproperlyConfigured(f"{where}: a name is 1-64 letters, digits, '_', '.' or '-'")
        if not isinstance(entry, dict) or set(entry) - {"base_url", "api_key_env", "allow_local", "prefill",
                                                        "label_token_ids"}:
            raise ImproperlyConfigured(f"{where} must be an object with base_url, api_key_env, allow_local, prefill, "
                                       "label_token_ids")
        url = entry.get("base_url")
        if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", url):
            raise ImproperlyConfigured(f"{where}.base_url must be an http(s) URL, got {url!r}")
        key_env = entry.get("api_key_env", "")
        if not isinstance(key_env, str) or (key_env and not re.fullmatch(r"[A-Z_][A-Z0-9_]*", key_env)):
            raise ImproperlyConfigured(f"{where}.api_key_env must be an environment variable name")
        allow_local = entry.get("allow_local", False)
        if not isinstance(allow_local, bool):
            raise ImproperlyConfigured(f"{where}.allow_local must be true or false")
        prefill = entry.get("prefill", False)
        if not isinstance(prefill, bool):
            raise ImproperlyConfigured(f"{where}.prefill must be true or false")
        endpoints[name] = {"base_url": url.rstrip("/"), "api_key_env": key_env, "allow_local": allow_local,
                           "prefill": prefill, "label_token_ids": _label_token_ids(entry.get("label_token_ids"), where)}
    return endpoints


def _label_token_ids(value: object, where: str) -> dict[str, list[int]] | None:
    """An endpoint's label_token_ids ({"Yes": [ids], "No": [ids]}: the served model's token ids of each word's
    spellings, e.g. "Yes", " Yes", "yes"), checked; None when not declared."""
    if value is None:
        return None
    where = f"{where}.label_token_ids"
    if not isinstance(value, dict) or set(value) != {"Yes", "No"}:
        raise ImproperlyConfigured(f'{where} must be {{"Yes": [token ids], "No": [token ids]}}')
    for word, ids in value.items():
        if not (isinstance(ids, list) and ids and all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)) or len(set(ids)) != len(ids):
            raise ImproperlyConfigured(f"{where}.{word} must be a non-empty list of distinct token ids (whole numbers "
                                       f"from 0), got {ids!r}")
    both = sorted(set(value["Yes"]) & set(value["No"]))
    if both:
        raise ImproperlyConfigured(f"{where}: token ids {both} are listed under both Yes and No")
    return {"Yes": list(value["Yes"]), "No": list(value["No"])}


LLM_ENDPOINTS = _llm_endpoints(env_str("LLM_ENDPOINTS"))
# Model folders (hf, embedding judges, LoRA adapters) must lie under one of these, after resolving links; the
# bundled MiniLM package folder is always allowed. A judge's folder may be relative to the checkout.
MODEL_ROOTS = [Path(p) for p in env_list("MODEL_ROOTS", [str(VAR_DIR / "models")])]
