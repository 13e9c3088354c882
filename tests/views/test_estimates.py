"""Estimates made by a worker and shown in place on the page that asked (labeling/views/estimates.py): the Systems
page's retrieval estimate and the fine-tuning page's, pending when the page answers, then their result or their
error; the web request itself loads no model (the model loaders record the thread they run in: only the worker's)."""
from __future__ import annotations

import re
import threading
from html import unescape

import pytest
from django.urls import reverse

from labeling.models import Estimate, FineTuneJob, RetrievalJob
from labeling.services import finetune, retrieval_estimate
from tests.finetune_fixtures import rule_project
from tests.polling import wait_for
from tests.url_matrix import ADMIN, build_world
from tests.views.test_finetune import _finetune_post, members

pytestmark = pytest.mark.django_db(transaction=True)

DENSE = {"retriever": "dense", "name": "", "depth": 5, "first_depth": 50, "keep": 20, "estimate": "1"}
CROSSENCODER = {"student": "crossencoder", "ce_base_model": "", "ce_epochs": 1, "ce_batch_size": 4,
                "ce_max_length": 64, "dry_run": "1"}


def loaded_in(monkeypatch, module, name: str, refuse: bool = False) -> list[str]:
    """The names of the threads that call `module.name` (a model loader), each call passed on; `refuse`: a call
    fails the test (no worker runs, so none may load a model)."""
    threads: list[str] = []
    real = getattr(module, name)

    def recording(*args, **kwargs):
        if refuse:
            raise AssertionError(f"{name} called in the web request")
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, recording)
    return threads


def finished_card(client, project, html: str) -> str:
    """Follow the estimate the page shows, as its htmx does, until it is finished: its last card."""
    url = reverse("labeling:estimate", args=[project.slug, int(re.search(r'data-estimate-job="(\d+)"', html)[1])])
    card = {}

    def finished() -> bool:
        card["html"] = unescape(client.get(url, headers={"HX-Request": "true"}).content.decode())
        return "hx-trigger" not in card["html"]

    wait_for(finished, "the estimate finished")
    return card["html"]


def test_the_retrieval_estimate_is_pending_when_the_page_answers_and_loads_no_model_there(client, monkeypatch):
    world = build_world()
    client.force_login(world.users[ADMIN])
    loaded_in(monkeypatch, retrieval_estimate, "retrieval_encoder", refuse=True)
    jobs = RetrievalJob.objects.count()
    response = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]), DENSE)
    html = unescape(response.content.decode())
    estimate = Estimate.objects.get(kind="retrieval")
    assert response.status_code == 200 and estimate.status == "pending"
    assert 'data-state="pending"' in html and 'hx-trigger="every 1s"' in html and "Estimate of the dense run" in html
    again = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]), DENSE).content.decode()
    assert Estimate.objects.filter(kind="retrieval").count() == 1 and f'data-estimate-job="{estimate.id}"' in again
    assert RetrievalJob.objects.count() == jobs


@pytest.mark.worker
def test_a_worker_makes_the_retrieval_estimate_and_the_page_shows_it(client, monkeypatch, worker):
    world = build_world()
    client.force_login(world.users[ADMIN])
    threads = loaded_in(monkeypatch, retrieval_estimate, "retrieval_encoder")
    response = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]), DENSE)
    card = finished_card(client, world.project, response.content.decode())
    passages = world.project.passages.count()
    assert 'data-state="done"' in card and f"dense over {passages} passage" in card, card
    assert re.search(r"about <strong>[^<]+</strong> here", card) and "encoding timed on" in card
    assert threads and threading.main_thread().name not in threads  # the encoder loaded on the worker only


def test_the_finetune_estimate_is_pending_when_the_page_answers_and_loads_no_model_there(client, monkeypatch,
                                                                                          tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    loaded_in(monkeypatch, finetune, "crossencoder_probe", refuse=True)
    response = client.post(reverse("labeling:finetune_start", args=[project.slug]),
                           _finetune_post(project, **CROSSENCODER))
    html = unescape(response.content.decode())
    assert response.status_code == 200 and 'data-state="pending"' in html and "Estimate of the fine-tuning" in html
    assert Estimate.objects.get().kind == "finetune" and not FineTuneJob.objects.exists()


@pytest.mark.worker
def test_a_worker_makes_the_finetune_estimate_and_a_failing_one_shows_its_error(client, monkeypatch, worker,
                                                                                  tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    threads = loaded_in(monkeypatch, finetune, "crossencoder_probe")
    response = client.post(reverse("labeling:finetune_start", args=[project.slug]),
                           _finetune_post(project, **CROSSENCODER))
    card = finished_card(client, project, response.content.decode())
    # q1's eight train pairs in batches of 4: 2 steps through 8 examples.
    assert 'data-state="done"' in card and "2 steps through 8 examples (8 in the set)" in card, card
    assert "from a timed probe of 8 examples going forward and backward on cpu" in card
    assert threads and threading.main_thread().name not in threads  # the base model loaded on the worker only

    refused = client.post(reverse("labeling:finetune_start", args=[project.slug]),
                          _finetune_post(project, **{**CROSSENCODER, "ce_base_model": "/etc"}))
    card = finished_card(client, project, refused.content.decode())
    assert 'data-state="failed"' in card and "Cannot estimate this fine-tuning" in card
    assert "is not under a model root" in card, card
    assert not FineTuneJob.objects.exists()
