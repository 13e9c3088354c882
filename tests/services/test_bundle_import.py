"""Bundle import: what gets stored, every kind of bad line, atomicity and idempotence."""
import json
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, Max

from labeling.models import (
    Judge,
    Judgment,
    Label,
    Membership,
    Pair,
    PairSource,
    Passage,
    Project,
    Query,
    RelevanceDefinition,
)
from labeling.services.bundle_import import BundleImportError, bundle_import
from labeling.services.drafting import definition_draft_create, definition_draft_run
from labeling.services.projects import project_create
from tests.factories import PairFactory, ProjectFactory
from tests.services.test_drafting import Scripted, openai_judge

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "climretrieve"
DIRAS_EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "diras-example"
TABLES = [Project, Query, RelevanceDefinition, Passage, Pair, PairSource, Label, Judge, Judgment, Membership]

pytestmark = pytest.mark.django_db


def table_state() -> dict:
    """Every row of every table, to prove an import wrote nothing."""
    state = {model.__name__: sorted(model.objects.values_list(flat=False)) for model in TABLES}
    state["users"] = sorted(get_user_model().objects.values_list("username", "password"))
    return state


def write_bundle(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def jsonl(*records) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


SMALL = {
    "queries.jsonl": jsonl(
        {"_id": "q1", "text": "Is there a flood plan?", "definition": "Plans for floods.", "metadata": {"intent": "a"}},
        {"_id": "q2", "text": "Heat risk?"},
    ),
    "corpus.jsonl": jsonl(
        {"_id": "d1", "title": "T1", "text": "Flood plan text."},
        {"_id": "d2", "text": "Heat text."},
        {"_id": "d3", "text": "Other."},
    ),
    "pairs.tsv": "query-id\tcorpus-id\tsystem\trank\nq1\td2\tbm25\t1\nq1\td1\tbm25\t2\nq1\td1\tdense\t1\nq2\td2\t\t\n",
    "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n",
    "labels.jsonl": jsonl(
        {"query_id": "q1", "doc_id": "d1", "annotator": "ann-a", "label": 2},
        {"query_id": "q1", "doc_id": "d1", "annotator": "ann-b", "label": "partially relevant"},
        {"query_id": "q2", "doc_id": "d3", "annotator": "ann-a", "label": 0, "role": "adjudicator"},
    ),
    "judgments.jsonl": jsonl(
        {"query_id": "q1", "doc_id": "d1", "judge": "llm", "p_relevant": 0.8},
        {"query_id": "q1", "doc_id": "d2", "judge": "llm", "guess": "no", "confidence": 0.9},
        {"query_id": "q2", "doc_id": "d1", "judge": "llm", "guess": "yes", "confidence": 0.6},
    ),
}


@pytest.fixture
def small(tmp_path) -> Path:
    return write_bundle(tmp_path / "small", SMALL)


def with_line(root: Path, name: str, content: str | bytes, *, mode: str = "append") -> Path:
    path = root / name
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(path.read_bytes() + data if mode == "append" else data)
    return root


def test_sample_bundle_counts():
    report = bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    assert report.project_created
    assert project.name == "ClimRetrieve (expert-judged sample)"
    assert project.label_scale.values == (0, 1, 2, 3)
    assert Query.objects.filter(project=project).count() == 16
    assert Passage.objects.filter(project=project).count() == 446
    assert Pair.objects.filter(project=project).count() == 595
    assert Pair.objects.filter(project=project, reference_grade__isnull=False).count() == 595
    assert RelevanceDefinition.objects.filter(query__project=project).count() == 16
    assert Judgment.objects.filter(pair__project=project).count() == 2363
    assert set(Judge.objects.filter(project=project).values_list("backend", flat=True)) == {"import"}


def test_sample_judgment_probability_follows_guess():
    bundle_import(path=SAMPLE, project_slug="cr")
    first = json.loads((SAMPLE / "judgments.jsonl").read_text().splitlines()[0])
    judgment = Judgment.objects.get(
        pair__query__external_id=first["query_id"], pair__passage__external_id=first["doc_id"], judge__name=first["judge"]
    )
    expected = first["confidence"] if first["guess"] == "yes" else 1 - first["confidence"]
    assert judgment.p_relevant == pytest.approx(expected)
    assert judgment.guess is (first["guess"] == "yes")
    assert judgment.definition.version == 1


def test_small_bundle_stores_everything(small):
    bundle_import(path=small, project_slug="s")
    project = Project.objects.get(slug="s")
    assert project.label_scale.values == (0, 1, 2)  # default scale without project.json
    pool = list(Pair.objects.filter(project=project).order_by("id").values_list("query__external_id", "passage__external_id"))
    # pairs.tsv order first, then pairs only other files name, in file order.
    assert pool == [("q1", "d2"), ("q1", "d1"), ("q2", "d2"), ("q2", "d3"), ("q2", "d1")]
    sources = PairSource.objects.filter(pair__query__external_id="q1", pair__passage__external_id="d1")
    assert sorted(sources.values_list("system", "rank")) == [("bm25", 2), ("dense", 1)]
    assert not PairSource.objects.filter(pair__query__external_id="q2").exists()
    pair = Pair.objects.get(query__external_id="q1", passage__external_id="d1")
    assert (pair.reference_grade, pair.reference_source) == (2, "qrels/test.tsv")
    labels = {(lab.annotator.username, lab.grade, lab.role) for lab in Label.objects.filter(pair__project=project)}
    assert labels == {("ann-a", 2, "annotator"), ("ann-b", 1, "annotator"), ("ann-a", 0, "adjudicator")}
    label = Label.objects.get(annotator__username="ann-b")
    assert label.definition.text == "Plans for floods."
    no_definition = Label.objects.get(pair__query__external_id="q2")
    assert no_definition.definition is None
    p = dict(Judgment.objects.values_list("pair__passage__external_id", "p_relevant").filter(pair__query__external_id="q1"))
    assert p == {"d1": 0.8, "d2": pytest.approx(0.1)}
    assert Query.objects.get(external_id="q1").metadata == {"intent": "a"}


def test_imported_annotators_cannot_log_in(small, client):
    bundle_import(path=small, project_slug="s")
    user = get_user_model().objects.get(username="ann-a")
    assert not user.has_usable_password()
    assert Membership.objects.get(user=user).role == "expert"
    assert not client.login(username="ann-a", password="")


def test_reimport_changes_nothing(small):
    first = bundle_import(path=small, project_slug="s")
    before = table_state()
    second = bundle_import(path=small, project_slug="s")
    assert first.changed and not second.changed
    assert table_state() == before


def test_sample_reimport_changes_nothing():
    bundle_import(path=SAMPLE, project_slug="cr")
    before = table_state()
    assert not bundle_import(path=SAMPLE, project_slug="cr").changed
    assert table_state() == before


def test_changed_definition_adds_a_version(small, tmp_path):
    bundle_import(path=small, project_slug="s")
    queries = (small / "queries.jsonl").read_text().replace("Plans for floods.", "Plans for floods and storms.")
    (small / "queries.jsonl").write_text(queries)
    report = bundle_import(path=small, project_slug="s")
    assert report.written["definitions"] == 1
    versions = RelevanceDefinition.objects.filter(query__external_id="q1").order_by("version")
    assert [(d.version, d.text) for d in versions] == [(1, "Plans for floods."), (2, "Plans for floods and storms.")]
    # The judgments now refer to version 2, so the same file adds them again for the new version.
    assert report.written["judgments"] == 2


def test_changed_label_keeps_history(small):
    bundle_import(path=small, project_slug="s")
    labels = (small / "labels.jsonl").read_text().replace('"annotator": "ann-a", "label": 2', '"annotator": "ann-a", "label": 0')
    (small / "labels.jsonl").write_text(labels)
    report = bundle_import(path=small, project_slug="s")
    assert report.written["labels"] == 1 and report.written["labels superseded"] == 1
    history = Label.objects.filter(annotator__username="ann-a", pair__passage__external_id="d1").order_by("id")
    assert [(lab.grade, lab.superseded_at is None) for lab in history] == [(2, False), (0, True)]


def test_diras_input_makes_every_pair():
    bundle_import(path=DIRAS_EXAMPLE, project_slug="diras")
    project = Project.objects.get(slug="diras")
    assert Query.objects.filter(project=project).count() == 2
    assert Passage.objects.filter(project=project).count() == 10
    assert Pair.objects.filter(project=project).count() == 20
    assert Passage.objects.get(project=project, external_id="d1").title == "Report Name 1"


def test_all_pairs_completes_the_pool(small):
    bundle_import(path=small, project_slug="s", all_pairs=True)
    assert Pair.objects.filter(project__slug="s").count() == 6


def test_all_pairs_refuses_absurd_sizes(small, settings):
    settings.IMPORT_MAX_ALL_PAIRS = 5
    with pytest.raises(BundleImportError, match=r"--all-pairs: every query x passage is 2 x 3 = 6 pairs"):
        bundle_import(path=small, project_slug="s", all_pairs=True)
    assert not Project.objects.exists()


# Each case: a file, a line appended to it (or the file's whole new content), and the message expected.
BAD_LINES = [
    ("queries.jsonl", '{"_id": "q9", "text": "x"\n', "queries.jsonl:3: malformed JSON"),
    ("queries.jsonl", '["q9", "x"]\n', "queries.jsonl:3: expected a JSON object, got list"),
    ("corpus.jsonl", '{"text": "no id"}\n', "corpus.jsonl:4: missing field '_id'"),
    ("corpus.jsonl", '{"_id": "d9"}\n', "corpus.jsonl:4: missing field 'text'"),
    ("corpus.jsonl", '{"_id": "d9", "text": "   "}\n', "corpus.jsonl:4: empty text"),
    ("queries.jsonl", '{"_id": "q9", "text": ""}\n', "queries.jsonl:3: empty text"),
    ("corpus.jsonl", '{"_id": "d2", "text": "again"}\n', "corpus.jsonl:4: duplicate passage id 'd2' (first at line 2)"),
    ("queries.jsonl", '{"_id": "q1", "text": "again"}\n', "queries.jsonl:3: duplicate query id 'q1' (first at line 1)"),
    ("pairs.tsv", "q1\td404\n", "pairs.tsv:6: expected 4 tab-separated columns, got 2"),
    ("pairs.tsv", "q1\td404\tbm25\t3\n", "pairs.tsv:6: unknown passage id 'd404'"),
    ("pairs.tsv", "q404\td1\tbm25\t3\n", "pairs.tsv:6: unknown query id 'q404'"),
    ("pairs.tsv", "q1\td2\tbm25\t7\n", "pairs.tsv:6: duplicate pair ('q1', 'd2') for system 'bm25'"),
    ("pairs.tsv", "q1\td3\tbm25\tfirst\n", "pairs.tsv:6: rank must be an integer, got 'first'"),
    ("qrels/test.tsv", "q1\td3\t7\n", "qrels/test.tsv:4: grade 7 is outside the scale [0, 1, 2]"),
    ("qrels/test.tsv", "q1\td3\thigh\n", "qrels/test.tsv:4: label 'high' is not a grade of the scale"),
    ("qrels/test.tsv", "q1\td1\t1\n", "qrels/test.tsv:4: duplicate reference grade for ('q1', 'd1')"),
    ("labels.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "annotator": "x", "label": 3}),
     "labels.jsonl:4: grade 3 is outside the scale [0, 1, 2]"),
    ("labels.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "annotator": "x", "label": "very"}),
     "labels.jsonl:4: label 'very' is not a grade of the scale"),
    ("labels.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "label": 1}), "labels.jsonl:4: missing field 'annotator'"),
    ("labels.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "annotator": "ann-a", "label": 1}),
     "labels.jsonl:4: duplicate label by 'ann-a' for ('q1', 'd1')"),
    ("labels.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "annotator": "z", "label": 1, "role": "boss"}),
     "labels.jsonl:4: role must be one of ['adjudicator', 'annotator'], got 'boss'"),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d3", "judge": "llm", "p_relevant": 1.5}),
     "judgments.jsonl:4: p_relevant 1.5 is outside [0, 1]"),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d3", "judge": "llm", "guess": "yes", "confidence": -0.1}),
     "judgments.jsonl:4: confidence -0.1 is outside [0, 1]"),
    ("judgments.jsonl", '{"query_id": "q1", "doc_id": "d3", "judge": "llm", "p_relevant": NaN}\n',
     "judgments.jsonl:4: p_relevant nan is outside [0, 1]"),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d3", "judge": "llm", "guess": "maybe", "confidence": 0.5}),
     'judgments.jsonl:4: guess must be "yes" or "no"'),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d3", "judge": "llm", "guess": "yes"}),
     "judgments.jsonl:4: missing field 'confidence' (guess and confidence go together)"),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d3", "judge": "llm"}),
     "judgments.jsonl:4: missing field 'p_relevant' (or 'guess' and 'confidence')"),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d1", "judge": "llm", "p_relevant": 0.1}),
     "judgments.jsonl:4: duplicate judgment by 'llm' for ('q1', 'd1')"),
    ("judgments.jsonl", jsonl({"query_id": "q1", "doc_id": "d404", "judge": "llm", "p_relevant": 0.1}),
     "judgments.jsonl:4: unknown passage id 'd404'"),
    # The bad byte is the 49th: 48 ASCII bytes precede it.
    ("judgments.jsonl", b'{"query_id": "q1", "doc_id": "d3", "judge": "caf\xe9", "p_relevant": 0.1}\n',
     "judgments.jsonl:4: bytes that are not UTF-8 (byte 49 of the line)"),
    ("corpus.jsonl", b'{"_id": "d9", "text": "\xff\xfe"}\n', "corpus.jsonl:4: bytes that are not UTF-8"),
    ("corpus.jsonl", '{"_id": "d9", "text": "nul \\u0000 byte"}\n', "corpus.jsonl:4: text contains a NUL character"),
]


@pytest.mark.parametrize(("name", "line", "message"), BAD_LINES, ids=[case[2] for case in BAD_LINES])
def test_one_bad_line_names_file_and_line_and_imports_nothing(small, name, line, message):
    with_line(small, name, line)
    with pytest.raises(BundleImportError) as caught:
        bundle_import(path=small, project_slug="s")
    assert any(problem.startswith(message) for problem in caught.value.problems.shown), caught.value.problems.shown
    assert not Project.objects.exists()
    assert not Passage.objects.exists()


def test_bad_header(small):
    with_line(small, "qrels/test.tsv", "qid\tdocid\tscore\nq1\td1\t1\n", mode="replace")
    with pytest.raises(BundleImportError, match=r"qrels/test.tsv:1: header must be query-id<TAB>corpus-id<TAB>score"):
        bundle_import(path=small, project_slug="s")


def test_over_long_line_is_reported_not_read(small, settings):
    settings.IMPORT_MAX_LINE_BYTES = 1000
    with_line(small, "corpus.jsonl", json.dumps({"_id": "d9", "text": "x" * 5000}) + "\n")
    with pytest.raises(BundleImportError, match=r"corpus.jsonl:4: line longer than 1000 bytes"):
        bundle_import(path=small, project_slug="s")


def test_bad_project_json(small):
    write_bundle(small, {"project.json": json.dumps({"scale": {"grades": [{"value": 0, "name": "no", "gain": 0}],
                                                              "relevant_from": 2}})})
    with pytest.raises(BundleImportError, match=r"project.json: scale: relevant_from must be one of the grade values"):
        bundle_import(path=small, project_slug="s")


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleImportError, match=r"no queries.jsonl \(bundle\) or question.jsonl"):
        bundle_import(path=tmp_path, project_slug="s")
    with pytest.raises(BundleImportError, match=r"not a folder"):
        bundle_import(path=tmp_path / "missing", project_slug="s")


def test_problems_list_first_twenty_and_count_the_rest(small):
    with_line(small, "judgments.jsonl", "".join("{broken\n" for _ in range(25)))
    with pytest.raises(BundleImportError) as caught:
        bundle_import(path=small, project_slug="s")
    problems = caught.value.problems
    assert problems.total == 25 and len(problems.shown) == 20
    assert problems.shown[0].startswith("judgments.jsonl:4: malformed JSON")
    assert str(caught.value).endswith("... and 5 more problems")


def test_bad_last_line_leaves_existing_project_untouched(small, tmp_path):
    bundle_import(path=SAMPLE, project_slug="cr")
    PairFactory()
    before = table_state()
    bad = tmp_path / "cr-bad"
    shutil.copytree(SAMPLE, bad)
    with_line(bad, "corpus.jsonl", jsonl({"_id": "d9999", "text": "A new passage, valid."}))
    with_line(bad, "judgments.jsonl", jsonl({"query_id": "q01", "doc_id": "d9999", "judge": "new", "p_relevant": 2}))
    with pytest.raises(BundleImportError, match=r"judgments.jsonl:2364: p_relevant 2 is outside \[0, 1\]"):
        bundle_import(path=bad, project_slug="cr")
    assert table_state() == before


def test_conflict_with_stored_data_is_reported_and_nothing_written(small):
    bundle_import(path=small, project_slug="s")
    before = table_state()
    corpus = (small / "corpus.jsonl").read_text().replace("Heat text.", "Heat text, rewritten.")
    (small / "corpus.jsonl").write_text(corpus + jsonl({"_id": "d4", "text": "new"}))
    judgments = (small / "judgments.jsonl").read_text().replace('"p_relevant": 0.8', '"p_relevant": 0.7')
    (small / "judgments.jsonl").write_text(judgments)
    qrels = (small / "qrels/test.tsv").read_text().replace("q1\td1\t2", "q1\td1\t1")
    (small / "qrels/test.tsv").write_text(qrels)
    with pytest.raises(BundleImportError) as caught:
        bundle_import(path=small, project_slug="s")
    assert caught.value.problems.shown == [
        "corpus.jsonl:2: passage 'd2' is already stored with a different title or text (an import never rewrites it)",
        "qrels/test.tsv:2: the pair already has reference grade 2, not 1",
        "judgments.jsonl:1: judge 'llm' already has a judgment of this pair under the current definition with "
        "P(relevant)=0.8, not 0.7",
    ]
    assert table_state() == before


def test_scale_change_refused_once_pairs_exist(small):
    bundle_import(path=small, project_slug="s")
    write_bundle(small, {"project.json": json.dumps({"scale": {"grades": [
        {"value": 0, "name": "no", "gain": 0}, {"value": 1, "name": "yes", "gain": 1}], "relevant_from": 1}})})
    with pytest.raises(BundleImportError, match=r"project.json: the scale differs"):
        bundle_import(path=small, project_slug="s")


def test_bad_slug(small):
    with pytest.raises(BundleImportError, match=r"--project: 'no spaces' is not a slug"):
        bundle_import(path=small, project_slug="no spaces")


def test_staging_tables_are_dropped(small):
    bundle_import(path=small, project_slug="s")
    tables = connection.introspection.table_names(include_views=False)
    assert not [name for name in tables if name.startswith("import_stage_")]


@pytest.mark.parametrize(("bundle", "query_id"), [("sample", None), ("small", "q2")], ids=["sample", "no-definition"])
def test_reimport_after_an_llm_draft_changes_nothing(small, bundle, query_id):
    """A draft is the query's newest version but not its current one: the import must not take it for the
    current definition (which would copy version 1 after it and attach judgments and labels to the draft). In
    the small bundle q2 has no definition at all, so its draft is its only version."""
    path = SAMPLE if bundle == "sample" else small
    bundle_import(path=path, project_slug="p")
    queries = Query.objects.filter(project__slug="p").order_by("id")
    query = queries.get(external_id=query_id) if query_id else queries.first()
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=False, user=None)
    definition_draft_run(draft_id=draft.id, generate=Scripted())
    assert RelevanceDefinition.objects.get(query=query, is_draft=True).version == query.definitions.count()
    before = table_state()
    ids = {model.__name__: model.objects.aggregate(n=Count("id"), top=Max("id")) for model in TABLES}

    report = bundle_import(path=path, project_slug="p")

    assert not report.changed, report.written
    assert {model.__name__: model.objects.aggregate(n=Count("id"), top=Max("id")) for model in TABLES} == ids
    assert table_state() == before
    assert not Judgment.objects.filter(definition__is_draft=True).exists()
    assert not Label.objects.filter(definition__is_draft=True).exists()


def test_a_changed_definition_after_an_llm_draft_is_numbered_after_the_draft(small):
    bundle_import(path=small, project_slug="s")
    query = Query.objects.get(project__slug="s", external_id="q1")
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=False, user=None)
    definition_draft_run(draft_id=draft.id, generate=Scripted())
    queries = (small / "queries.jsonl").read_text().replace("Plans for floods.", "Plans for floods and storms.")
    (small / "queries.jsonl").write_text(queries)
    report = bundle_import(path=small, project_slug="s")
    assert report.written["definitions"] == 1
    versions = query.definitions.order_by("version").values_list("version", "is_draft", "text")
    assert [(v, is_draft) for v, is_draft, _ in versions] == [(1, False), (2, True), (3, False)]
    assert versions[2][2] == "Plans for floods and storms."
    # The bundle's judgments of q1 are added under version 3, the current one.
    assert set(Judgment.objects.filter(pair__query=query).values_list("definition__version", flat=True)) == {1, 3}


def test_a_bundle_keeps_the_name_and_description_given_to_its_project_and_fills_only_empty_ones(small):
    """Someone created the project with a name and no description: the bundle's project.json fills the description,
    the name stays theirs; a second import with another description changes nothing."""
    staff = get_user_model().objects.create(username="staff", is_staff=True)
    project_create(by=staff, name="Our flood study", slug="s")
    write_bundle(small, {"project.json": json.dumps({"name": "Bundle's own name", "description": "From the bundle."})})
    bundle_import(path=small, project_slug="s")
    project = Project.objects.get(slug="s")
    assert (project.name, project.description) == ("Our flood study", "From the bundle.")
    write_bundle(small, {"project.json": json.dumps({"name": "Bundle's own name", "description": "Changed."})})
    report = bundle_import(path=small, project_slug="s")
    assert not report.changed
    project.refresh_from_db()
    assert (project.name, project.description) == ("Our flood study", "From the bundle.")


def test_a_new_project_is_named_by_project_json_or_its_slug_unless_another_project_has_the_name(small):
    ProjectFactory(slug="first", name="Flood study")
    before = table_state()
    write_bundle(small, {"project.json": json.dumps({"name": "  FLOOD Study "})})
    with pytest.raises(BundleImportError) as taken:
        bundle_import(path=small, project_slug="s")
    assert taken.value.problems.shown == [("project.json: a project named 'Flood study' exists already: choose "
                                           "another name (project names are compared ignoring case)")]
    assert table_state() == before
    (small / "project.json").unlink()
    ProjectFactory(slug="other", name="S")
    before = table_state()
    with pytest.raises(BundleImportError, match=r"^1 problem\(s\); nothing was imported:\n--project: a project named "
                                                r"'S' exists already"):
        bundle_import(path=small, project_slug="s")
    assert table_state() == before
    bundle_import(path=small, project_slug="s-2")
    assert Project.objects.get(slug="s-2").name == "s-2"


def test_admin_makes_an_account_an_admin_of_the_project(small):
    """The operator's command names the project's admin: a project it creates would have no member to manage it."""
    owner = get_user_model().objects.create(username="owner")
    with pytest.raises(BundleImportError, match=r"--admin: there is no user named 'ghost'"):
        bundle_import(path=small, project_slug="s", admin="ghost")
    assert not Project.objects.filter(slug="s").exists()
    report = bundle_import(path=small, project_slug="s", admin="owner")
    assert report.written["admins"] == 1
    assert Membership.objects.get(project__slug="s", user=owner).role == Membership.Role.ADMIN
    assert bundle_import(path=small, project_slug="s", admin="owner").changed is False
