"""The project page's qrels download: the same bytes as `manage.py export_qrels` with the same options, for every
format and grade source, streamed as an attachment named for the project, the source and the day; only the
members blind first lets read the gold grades and the judges' P get the form and the file."""
from __future__ import annotations

import io
import random
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from labeling.models import Judge, Judgment, Membership, Pair, Project
from labeling.services.bundle_import import bundle_import
from labeling.services.validation import judge_calibrate
from tests.factories import MembershipFactory, UserFactory
from tests.services.test_bundle_import import jsonl, write_bundle

pytestmark = pytest.mark.django_db

SLUG = "exp"
CALIBRATED = "squashed"  # P squashed toward 0.5, then calibrated: the exported grades follow the calibrated P
RAW = "llama 3.1/tok"  # no calibrator: its grades are its P against the threshold as imported
FORMATS = ("trec", "beir", "jsonl")
SOURCES = (
    ("human", None),
    (f"judge:{RAW}", None),
    (f"judge:{RAW}", "0.7"),
    (f"judge:{CALIBRATED}", "0.35"),
    (f"combined:{CALIBRATED}", None),
    (f"combined:{RAW}", "0.25"),
)
CASES = [(format, source, threshold) for format in FORMATS for source, threshold in SOURCES]


def export_bundle(root: Path, *, queries: int = 3, per_query: int = 24, seed: int = 11) -> dict:
    """A bundle whose ids are not all ASCII and whose gold covers two thirds of each query's pairs, judged by two
    judges; returns the reference data written: {"gold": {(q, d): grade}, "p": {judge: {(q, d): P}}, "order"}."""
    rng = random.Random(seed)
    qs, docs, qrels, judgments, order = [], [], ["query-id\tcorpus-id\tscore"], [], []
    gold: dict[tuple[str, str], int] = {}
    p: dict[str, dict[tuple[str, str], float]] = {CALIBRATED: {}, RAW: {}}
    for qi in range(queries):
        query = f"q{qi}-ü"
        qs.append({"_id": query, "text": f"Question {qi}, naïve?", "definition": f"Definition {qi}."})
        for di in range(per_query):
            doc = f"d{qi}-{di}-é"
            docs.append({"_id": doc, "text": f"Passage {doc} — «text»."})
            order.append((query, doc))
            chance = rng.random()
            if di % 3:
                grade = rng.choice([1, 2]) if rng.random() < chance else 0
                gold[(query, doc)] = grade
                qrels.append(f"{query}\t{doc}\t{grade}")
            p[CALIBRATED][(query, doc)] = round(0.5 + 0.3 * (chance - 0.5), 4)
            p[RAW][(query, doc)] = round(rng.random(), 4)
            for judge in (CALIBRATED, RAW):
                judgments.append({"query_id": query, "doc_id": doc, "judge": judge, "p_relevant": p[judge][(query, doc)]})
    write_bundle(root, {
        "queries.jsonl": jsonl(*qs), "corpus.jsonl": jsonl(*docs), "qrels/test.tsv": "\n".join(qrels) + "\n",
        "judgments.jsonl": jsonl(*judgments),
    })
    return {"gold": gold, "p": p, "order": order}


def export_project(tmp_path: Path) -> tuple[Project, dict, dict]:
    """The project (one judge calibrated), its reference data and a user of each role."""
    reference = export_bundle(tmp_path / "bundle")
    bundle_import(path=tmp_path / "bundle", project_slug=SLUG)
    project = Project.objects.get(slug=SLUG)
    judge_calibrate(judge=Judge.objects.get(project=project, name=CALIBRATED))
    users = {}
    for role in Membership.Role.values:
        users[role] = UserFactory(username=f"export-{role}")
        MembershipFactory(project=project, user=users[role], role=role)
    return project, reference, users


def command_bytes(tmp_path: Path, format: str, source: str, threshold: str | None) -> bytes:
    out = tmp_path / f"command-{format}.out"
    options = ["--threshold", threshold] if threshold is not None else []
    call_command("export_qrels", "--project", SLUG, "--format", format, "--source", source, *options,
                 "-o", str(out), stderr=io.StringIO())
    return out.read_bytes()


def query(format: str, source: str, threshold: str | None) -> dict[str, str]:
    return {"format": format, "source": source, **({"threshold": threshold} if threshold is not None else {})}


@pytest.fixture
def world(tmp_path):
    return export_project(tmp_path)


@pytest.mark.parametrize(("format", "source", "threshold"), CASES)
def test_the_download_is_the_commands_file_byte_for_byte(client, tmp_path, world, format, source, threshold):
    _, _, users = world
    client.force_login(users[Membership.Role.ADMIN])
    response = client.get(reverse("labeling:qrels_export", args=[SLUG]), query(format, source, threshold))
    assert response.status_code == 200
    assert response.streaming
    body = b"".join(response.streaming_content)
    assert body == command_bytes(tmp_path, format, source, threshold)
    assert body  # every case exports something: an empty file would prove nothing


def test_human_trec_holds_the_gold_grades_in_pool_order(client, world):
    _, reference, users = world
    client.force_login(users[Membership.Role.VIEWER])
    response = client.get(reverse("labeling:qrels_export", args=[SLUG]))
    expected = "".join(f"{q} 0 {d} {reference['gold'][(q, d)]}\n" for q, d in reference["order"]
                       if (q, d) in reference["gold"])
    assert b"".join(response.streaming_content).decode() == expected


def test_the_file_is_an_attachment_named_for_project_source_and_day(client, world):
    _, _, users = world
    client.force_login(users[Membership.Role.ADMIN])
    url = reverse("labeling:qrels_export", args=[SLUG])
    today = timezone.localdate().isoformat()
    names = {
        ("trec", "human", None): (f"{SLUG}_qrels_human_{today}.qrels", "text/plain; charset=utf-8"),
        ("beir", f"judge:{RAW}", "0.7"): (f"{SLUG}_qrels_judge-llama-31tok-t0.7_{today}.tsv",
                                          "text/tab-separated-values; charset=utf-8"),
        ("jsonl", f"combined:{CALIBRATED}", None): (f"{SLUG}_qrels_combined-squashed-t0.5_{today}.jsonl",
                                                    "application/x-ndjson; charset=utf-8"),
    }
    for (format, source, threshold), (name, media_type) in names.items():
        response = client.get(url, query(format, source, threshold))
        assert response["Content-Disposition"] == f'attachment; filename="{name}"'
        assert response["Content-Type"] == media_type


@pytest.mark.parametrize(("params", "message"), [
    ({"format": "csv"}, "format must be one of trec, beir, jsonl, got &#x27;csv&#x27;"),
    ({"source": "judge:nobody"}, f"project &#x27;{SLUG}&#x27; has no judge &#x27;nobody&#x27;"),
    ({"source": f"judge:{CALIBRATED}", "threshold": "high"}, "threshold must be a number within [0, 1]"),
    ({"source": f"judge:{CALIBRATED}", "threshold": "1.5"}, "within [0, 1], got 1.5"),
    ({"threshold": "0.5"}, "applies to a judge source"),
])
def test_a_wrong_choice_goes_back_to_the_form_saying_what_is_wrong(client, world, params, message):
    _, _, users = world
    client.force_login(users[Membership.Role.ADMIN])
    response = client.get(reverse("labeling:qrels_export", args=[SLUG]), params, follow=True)
    assert response.redirect_chain[-1][0].endswith(f"/projects/{SLUG}/#export")
    assert message in response.content.decode()


@pytest.mark.parametrize("role", [Membership.Role.ADMIN, Membership.Role.VIEWER])
def test_admins_and_viewers_get_the_form_with_every_source(client, world, role):
    _, _, users = world
    client.force_login(users[role])
    html = client.get(reverse("labeling:project_detail", args=[SLUG])).content.decode()
    assert 'data-testid="export-form"' in html
    for value in ("human", f"judge:{CALIBRATED}", f"combined:{CALIBRATED}", f"judge:{RAW}", f"combined:{RAW}"):
        assert f'<option value="{value}">' in html


def test_an_expert_gets_neither_the_form_nor_the_file(client, world):
    _, _, users = world
    client.force_login(users[Membership.Role.EXPERT])
    html = client.get(reverse("labeling:project_detail", args=[SLUG])).content.decode()
    assert 'data-testid="export-form"' not in html
    for format in FORMATS:
        response = client.get(reverse("labeling:qrels_export", args=[SLUG]), {"format": format})
        assert response.status_code == 403


def test_a_judge_that_has_not_scored_the_whole_pool_is_marked_partial_on_the_form(client, world):
    project, reference, users = world
    pool = len(reference["order"])
    unjudged = list(Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True)[: pool // 4])
    Judgment.objects.filter(judge__name=RAW, pair_id__in=unjudged).delete()
    client.force_login(users[Membership.Role.VIEWER])
    html = client.get(reverse("labeling:project_detail", args=[SLUG])).content.decode()
    percent = (pool - len(unjudged)) * 100 // pool
    raw = escape(RAW)
    assert re.search(rf'<option value="judge:{re.escape(raw)}" data-partial="{percent}" title="[^"]*">'
                     rf'judge:{re.escape(raw)} &mdash; partial \({percent}&nbsp;%\)</option>', html)
    assert f"{len(unjudged)} of the {pool} pool pairs have no judgment from it" in html
    # The calibrated judge scored every pair: its options carry no mark.
    assert f'<option value="judge:{CALIBRATED}">' in html and f'data-export-partial="{CALIBRATED}"' not in html
