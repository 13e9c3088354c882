"""Every labeling model has an admin whose pages load for a superuser and stay closed to everyone else."""
import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from labeling import models
from tests.factories import (
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairSourceFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

MODELS = [
    models.Project,
    models.Membership,
    models.Query,
    models.RelevanceDefinition,
    models.Passage,
    models.Pair,
    models.PairSource,
    models.Label,
    models.Judge,
    models.Judgment,
    models.JudgeCalibration,
    models.ValidationResult,
    models.ScoringJob,
    models.ScoringChunk,
]

READ_ONLY = (models.JudgeCalibration, models.ValidationResult, models.ScoringJob, models.ScoringChunk)


@pytest.fixture
def one_of_each():
    """A single project holding a row in every table."""
    source = PairSourceFactory()
    pair = source.pair
    definition = RelevanceDefinitionFactory(query=pair.query)
    MembershipFactory(project=pair.project)
    LabelFactory(pair=pair, definition=definition)
    LabelFactory(pair=pair, superseded_at=timezone.now())
    judgment = JudgmentFactory(pair=pair, definition=definition)
    models.JudgeCalibration.objects.create(
        judge=judgment.judge, method="isotonic", params={"x": [0.0, 1.0], "y": [0.0, 1.0]}, cv={}, n=1,
        n_relevant=1, fitted_on={"pair_ids": [pair.id], "p": [judgment.p_relevant], "relevant": [1]},
    )
    models.ValidationResult.objects.create(project=pair.project, data={"judges": []}, computed_at=timezone.now())
    job = models.ScoringJob.objects.create(project=pair.project, judge=judgment.judge, scope="all", total=1)
    models.ScoringChunk.objects.create(job=job, query=pair.query, pair_ids=[pair.id], size=1)
    return pair


@pytest.fixture
def superuser_client(client):
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    return client


def admin_url(model, view: str, *args) -> str:
    return reverse(f"admin:labeling_{model._meta.model_name}_{view}", args=args)


def test_every_labeling_model_is_registered():
    registered = {m for m in admin.site._registry if m._meta.app_label == "labeling"}
    assert registered == set(MODELS)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_changelist_add_and_change_pages_load(superuser_client, one_of_each, model):
    obj = model.objects.first()
    for url in (admin_url(model, "changelist"), admin_url(model, "change", obj.pk)):
        assert superuser_client.get(url).status_code == 200, url
    # Calibrations and cached reports are written by services only: they can be viewed, not added by hand.
    expected = 403 if model in READ_ONLY else 200
    assert superuser_client.get(admin_url(model, "add")).status_code == expected


@pytest.mark.parametrize(
    ("model", "params"),
    [
        (models.Label, {"state": "superseded"}),
        (models.Label, {"q": "nobody"}),
        (models.Judgment, {"status__exact": "ok"}),
        (models.Pair, {"q": "q0"}),
        (models.Passage, {"q": "d"}),
    ],
)
def test_filters_and_search_work(superuser_client, one_of_each, model, params):
    assert superuser_client.get(admin_url(model, "changelist"), params).status_code == 200


@pytest.mark.parametrize("state", ["current", "superseded"])
def test_label_state_filter(superuser_client, one_of_each, state):
    response = superuser_client.get(admin_url(models.Label, "changelist"), {"state": state})
    expected = models.Label.objects.filter(superseded_at__isnull=state == "current")
    assert list(response.context["cl"].result_list) == list(expected)
    assert len(expected) == 1


@pytest.mark.parametrize("model", [models.Pair, models.PairSource, models.Label, models.Judgment, models.Passage])
def test_big_tables_skip_full_counts_and_facets(model):
    model_admin = admin.site._registry[model]
    assert model_admin.show_full_result_count is False
    assert model_admin.show_facets is admin.ShowFacets.NEVER


def test_admin_is_closed_to_non_staff(client, one_of_each):
    client.force_login(UserFactory())
    response = client.get(admin_url(models.Pair, "changelist"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.parametrize(
    ("model", "factory"),
    [
        (models.Pair, PairSourceFactory),
        (models.PairSource, PairSourceFactory),
        (models.Label, LabelFactory),
        (models.Judgment, JudgmentFactory),
        (models.RelevanceDefinition, RelevanceDefinitionFactory),
        (models.Membership, MembershipFactory),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_changelist_queries_do_not_grow_with_rows(superuser_client, model, factory):
    factory()
    url = admin_url(model, "changelist")
    with CaptureQueriesContext(connection) as one_row:
        superuser_client.get(url)
    factory.create_batch(5)
    with CaptureQueriesContext(connection) as six_rows:
        superuser_client.get(url)
    assert len(six_rows) == len(one_row)
