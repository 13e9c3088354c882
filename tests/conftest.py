"""Shared fixtures. The suite runs on DATABASE_URL when set (PostgreSQL in CI), else on SQLite."""
import os
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest

os.environ.setdefault("DEBUG", "1")


def _isolate_xdist_worker() -> None:
    """Under pytest-xdist (`-n 2`) each worker process has its own test database (pytest-django adds the worker's
    name), its own tmp_path, MEDIA_ROOT and live_server port; its Redis broker it gets here: a Redis database per
    worker (gw0 keeps the configured one), so a Celery worker one test starts never takes the tasks the other
    process's tests send, whose rows are in the other test database. pytest-django has read the settings by now,
    so the setting and the Celery app are told too; worker processes the tests start inherit the environment.
    Torch gets one thread per process: two processes on two cores would otherwise each run a thread per core and
    fight for them."""
    name = os.environ.get("PYTEST_XDIST_WORKER")
    if not name:
        return
    for threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(threads, "1")
    if "torch" in sys.modules:  # a plugin or conftest imported it first: too late for the variable
        sys.modules["torch"].set_num_threads(1)
    broker = urlsplit(os.environ.get("CELERY_BROKER_URL", ""))
    if broker.scheme not in ("redis", "rediss"):
        return  # the filesystem broker: tests that start a worker give it a folder of their own (private_broker)
    database = int(broker.path.strip("/") or 0) + int(name.removeprefix("gw"))
    url = urlunsplit(broker._replace(path=f"/{database}"))
    os.environ["CELERY_BROKER_URL"] = url
    from django.conf import settings

    from annotator.celery import app

    settings.CELERY_BROKER_URL = app.conf.broker_url = url


_isolate_xdist_worker()


@pytest.fixture
def private_broker(tmp_path):
    """A broker of this test's own when the broker is a folder: a demo worker running beside the tests must not
    take its tasks, and the next test must not find its leftovers. Yields the folder (None on Redis).

    Celery keeps a pool of producer connections built from the transport options in force when it was first used,
    so the pool is closed on the way in and out: otherwise a second test in the same process would keep sending to
    the first test's folder."""
    from annotator.celery import app

    if not app.conf.broker_url.startswith("filesystem://"):
        yield None
        return
    folder = tmp_path / "broker"
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True)
    before = app.conf.broker_transport_options

    def reset_pool():
        from kombu import pools

        if app._pool is not None:
            app._pool.force_close_all()
            app._pool = None
        app.amqp._producer_pool = None
        pools.reset()  # kombu's own registry of producer pools, keyed by connection

    reset_pool()
    app.conf.broker_transport_options = {
        "data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"), "control_folder": str(folder / "control"),
        "polling_interval": 0.2,
    }
    try:
        yield folder
    finally:
        reset_pool()
        app.conf.broker_transport_options = before


@pytest.fixture
def browser(monkeypatch):
    """Debian's chromium under playwright (tests.browser.needs_chromium skips where there is none). live_server
    runs Django in a thread of this process and playwright's sync API runs an event loop here, hence the
    setting, for this test only: left in os.environ it would reach `check --deploy` in
    tests/annotator/test_settings.py."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def worker(private_broker):
    """A real Celery worker in a thread of this process (solo pool) on this test's own broker."""
    from celery.contrib.testing.worker import start_worker

    from annotator.celery import app

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield


@pytest.fixture(autouse=True)
def client_login_passes_a_request(monkeypatch):
    """django-axes throttles logins by their request (address) and refuses to authenticate without one, which the
    test client's login() does not pass: give it a blank request, as axes' documentation advises for tests."""
    from django.http import HttpRequest
    from django.test import Client

    login = Client.login

    def login_with_request(self, **credentials):
        return login(self, request=HttpRequest(), **credentials)

    monkeypatch.setattr(Client, "login", login_with_request)


@pytest.fixture(autouse=True)
def llm_endpoints(settings):
    """The operator's declared LLM endpoints, per test: one loopback address nothing listens on. Tests add their
    own servers with tests.endpoints.declare_endpoint, as an operator would in LLM_ENDPOINTS."""
    settings.LLM_ENDPOINTS = {
        "unreachable": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "", "allow_local": True},
    }
    return settings.LLM_ENDPOINTS


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path_factory):
    """Files stored through the default storage (passage embeddings...) go to a folder of this test's own, never
    to var/media of the checkout."""
    settings.MEDIA_ROOT = str(tmp_path_factory.mktemp("media"))
    return settings.MEDIA_ROOT


@pytest.fixture(scope="session")
def reranker_root(tmp_path_factory):
    """A model root holding a cross-encoder (folder `reranker`): the bundled MiniLM under a seeded one-logit head."""
    import torch  # heavy: only the sessions whose tests use the re-ranker load it
    from sentence_transformers import CrossEncoder

    from models_llm.bundled import minilm_folder

    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    CrossEncoder(str(minilm_folder()), num_labels=1, local_files_only=True, device="cpu").save_pretrained(
        str(root / "reranker"))
    return root
