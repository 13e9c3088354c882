"""Training sets: DIRAS's sample of a run (per query, passages drawn from within its top with the run's ranks and
from outside it, seeded, pooled with provenance) and the report rule, checked against rankings worked out by hand;
the split by query (DIRAS's 11 of 31 questions by default for report data); imports of DIRAS's three files; errors that store nothing; the JSONL in SmolLM2's template with a teacher's
answers; and the command."""
import csv
import io
import json
import random as stdlib_random
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from transformers import AutoTokenizer

from labeling.exceptions import NotFound, TooLarge
from labeling.models import FineTuneJob, Judgment, Pair, PairSource, Passage, TrainingExample, TrainingSet
from labeling.selectors.finetune_training_sets import (
    TrainingExportError,
    training_examples,
    training_set_by_name,
    training_set_jsonl,
    training_sets_of_project,
)
from labeling.services.finetune_training_sets import (
    TrainingSetError,
    training_set_create,
    training_set_delete,
    training_set_import,
)
from labeling.services.runs import run_store
from models_llm.bundled import smollm2_folder
from models_llm.finetune.files import read_file_examples
from models_llm.prompts import build_prompt
from models_llm.types import JudgeConfig, PairInput
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
)

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parents[2] / "data" / "diras-distill"
QUERIES = [f"q{i}" for i in range(1, 9)]
PASSAGES = [f"d{i}" for i in range(1, 41)]


def store_run(project, name: str, rankings: dict[str, list[str]], kind: str = "dense"):
    """Store rankings (external ids, best first) with falling scores, so the run's ranks are the lists' order."""
    queries = dict(project.queries.values_list("external_id", "id"))
    passages = dict(project.passages.values_list("external_id", "id"))
    return run_store(project=project, name=name, kind=kind, parameters={}, rankings=[
        (queries[q], [passages[d] for d in docs], [float(len(docs) - i) for i in range(len(docs))])
        for q, docs in rankings.items()
    ])


@pytest.fixture
def project():
    project = ProjectFactory(slug="ts")
    for ext in QUERIES:
        QueryFactory(project=project, external_id=ext)
    for ext in PASSAGES:
        PassageFactory(project=project, external_id=ext)
    return project


@pytest.fixture
def dense(project):
    rng = stdlib_random.Random(5)
    by_hand = {q: rng.sample(PASSAGES, 15) for q in QUERIES}
    return store_run(project, "dense", by_hand), by_hand


def sampled(training_set) -> set[tuple[str, str, str, int | None, str]]:
    return set(TrainingExample.objects.filter(training_set=training_set).values_list(
        "pair__query__external_id", "pair__passage__external_id", "origin", "rank", "split"))


def test_each_query_gets_passages_drawn_inside_its_top_with_their_ranks_and_outside_it(project, dense):
    run, by_hand = dense
    training_set = training_set_create(project=project, name="s", run=run, top=5, inside=3, outside=4, seed=1)
    rows = sampled(training_set)
    for query in QUERIES:
        inside = {(d, rank) for q, d, origin, rank, _ in rows if q == query and origin == "top"}
        outside = [d for q, d, origin, rank, _ in rows if q == query and origin == "random" and rank is None]
        # By hand: 3 of the 5 best, each with its rank; 4 distinct passages of the 35 outside the 5 best.
        assert len(inside) == 3 and inside <= {(d, rank) for rank, d in enumerate(by_hand[query][:5], start=1)}
        assert len(outside) == len(set(outside)) == 4 and not set(outside) & set(by_hand[query][:5])
    assert len(rows) == len(QUERIES) * 7
    # The pairs are the pool's, with who found them: the run with its rank, the outside draw without one.
    sources = set(PairSource.objects.filter(pair__project=project).values_list(
        "pair__query__external_id", "pair__passage__external_id", "system", "rank"))
    assert sources == {(q, d, "dense" if origin == "top" else "random:1", rank) for q, d, origin, rank, _ in rows}
    assert training_set.parameters | {"run_id": None} == {
        "run": "dense", "run_id": None, "top": 5, "inside": 3, "outside": 4, "seed": 1, "held_out": 0.2,
        "held_out_rule": "default", "report_rule": False, "random_system": "random:1",
        "pooled": {"pairs": 56, "pool sources": 56}, "queries": 8, "inside_drawn": 24, "outside_drawn": 32,
        "short_queries": 0, "short": []}


def test_the_same_seed_draws_the_same_pairs_and_another_seed_others(project, dense):
    run, by_hand = dense
    first = training_set_create(project=project, name="a", run=run, top=5, inside=3, outside=5, seed=11)
    again = training_set_create(project=project, name="b", run=run, top=5, inside=3, outside=5, seed=11)
    other = training_set_create(project=project, name="c", run=run, top=5, inside=3, outside=5, seed=12)
    assert sampled(first) == sampled(again)
    assert again.parameters["pooled"] == {"pairs": 0, "pool sources": 0}
    rows = {seed: {row[:3] for row in sampled(s)} for seed, s in ((11, first), (12, other))}
    assert rows[11] != rows[12]
    for drawn in rows.values():
        assert all((d in by_hand[q][:5]) == (origin == "top") for q, d, origin in drawn)


@pytest.mark.parametrize(("share", "held"), [(0.25, 2), (0.5, 4), (0.0, 0), (0.9, 7)])
def test_the_split_is_by_query(project, dense, share, held):
    run, _ = dense
    training_set = training_set_create(project=project, name="s", run=run, top=2, inside=2, outside=2, seed=3,
                                       held_out=share)
    sides: dict[str, set[str]] = {}
    for query, _, _, _, split in sampled(training_set):
        sides.setdefault(query, set()).add(split)
    assert all(len(side) == 1 for side in sides.values())  # never a query on both sides
    # By hand: round(share * 8 queries), never all of them.
    assert sum(side == {"held_out"} for side in sides.values()) == held
    assert set(TrainingExample.objects.filter(training_set=training_set).values_list("group", flat=True)) == set(
        QUERIES)


def in_reports(project) -> None:
    """d1-d20 are report R1's paragraphs, d21-d30 R2's, d31-d40 R3's."""
    for number in range(1, 41):
        report = "R1" if number <= 20 else "R2" if number <= 30 else "R3"
        Passage.objects.filter(project=project, external_id=f"d{number}").update(metadata={"report": report})


REPORT_RANKING = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d21", "d8", "d31", "d22", "d23"]


def test_diras_sample_draws_30_inside_each_reports_top_5_and_30_outside(project):
    in_reports(project)
    run = store_run(project, "dense", {"q1": REPORT_RANKING, "q2": list(reversed(REPORT_RANKING))})
    # DIRAS's sizes are the defaults: 30 drawn from within the top 5, 30 from outside it.
    training_set = training_set_create(project=project, name="s", run=run, seed=7)
    rank = {q: {d: i for i, d in enumerate(docs, start=1)} for q, docs in
            (("q1", REPORT_RANKING), ("q2", list(reversed(REPORT_RANKING))))}
    # By hand, each report's 5 best-ranked paragraphs: q1 R1 d1-d5 (d6, d7, d8 are its 6th to 8th), R2 d21 d22 d23,
    # R3 d31; q2 (reversed) R1 d8 d7 d6 d5 d4, R2 d23 d22 d21, R3 d31. 9 inside each top; the other 31 outside.
    top = {"q1": {"d1", "d2", "d3", "d4", "d5", "d21", "d22", "d23", "d31"},
           "q2": {"d8", "d7", "d6", "d5", "d4", "d23", "d22", "d21", "d31"}}
    rows = sampled(training_set)
    for query in ("q1", "q2"):
        inside = {(d, r) for q, d, origin, r, _ in rows if q == query and origin == "top"}
        outside = [d for q, d, origin, r, _ in rows if q == query and origin == "random"]
        assert inside == {(d, rank[query][d]) for d in top[query]}  # fewer than 30: all 9 taken
        assert len(outside) == len(set(outside)) == 30 and not set(outside) & top[query]  # 30 of the 31 outside
    assert training_set.parameters["top"] == 5 and training_set.parameters["report_rule"] is True
    assert (training_set.parameters["inside_drawn"], training_set.parameters["outside_drawn"]) == (18, 60)
    assert training_set.parameters["short_queries"] == 2
    assert training_set.parameters["short"] == [{"query": "q1", "inside": 9, "outside": 31},
                                                {"query": "q2", "inside": 9, "outside": 31}]


def test_a_report_sample_is_seeded_and_its_outside_draw_never_falls_inside_the_top(project):
    in_reports(project)
    run = store_run(project, "dense", {"q1": REPORT_RANKING})
    top = {"d1", "d2", "d3", "d4", "d5", "d21", "d22", "d23", "d31"}  # as above
    drawn = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        training_set = training_set_create(project=project, name=name, run=run, top=5, inside=4, outside=6,
                                           seed=seed, held_out=0)
        rows = sampled(training_set)
        assert len({d for _, d, origin, _, _ in rows if origin == "top"} & top) == 4
        outside = {d for _, d, origin, _, _ in rows if origin == "random"}
        assert len(outside) == 6 and not outside & top
        # d6, d7 and d8 are ranked by the run but are R1's 6th to 8th: outside the top, so they may be drawn there.
        assert not {d for _, d, origin, _, _ in rows if origin == "top"} & {"d6", "d7", "d8"}
        drawn[name] = rows
    assert drawn["a"] == drawn["b"] and drawn["a"] != drawn["c"]


def test_diras_data_holds_out_11_of_31_questions_by_default(project):
    in_reports(project)
    for number in range(9, 32):
        QueryFactory(project=project, external_id=f"q{number}")
    questions = [f"q{i}" for i in range(1, 32)]
    run = store_run(project, "dense", {q: REPORT_RANKING for q in questions})
    training_set = training_set_create(project=project, name="s", run=run, inside=2, outside=2)
    sides: dict[str, set[str]] = {}
    for query, _, _, _, split in sampled(training_set):
        sides.setdefault(query, set()).add(split)
    # DIRAS section 3: "We split the questions into 11 for testing and 20 for training".
    assert sorted(len(side) for side in sides.values()) == [1] * 31
    assert sum(side == {"held_out"} for side in sides.values()) == 11
    assert training_set.parameters["held_out_rule"] == "diras"
    # Without reports the product's default share stays 0.2; a given share is taken as given.
    Passage.objects.filter(project=project).update(metadata={})
    plain = training_set_create(project=project, name="p", run=run, inside=2, outside=2)
    held = {q for q, _, _, _, split in sampled(plain) if split == "held_out"}
    assert len(held) == round(0.2 * 31) and plain.parameters["held_out_rule"] == "default"


def test_the_default_run_is_the_newest_dense_run(project):
    with pytest.raises(TrainingSetError, match="retrieve one first"):
        training_set_create(project=project, name="s")
    store_run(project, "old", {"q1": ["d1", "d2"]})
    store_run(project, "new", {"q2": ["d3", "d4"]})
    store_run(project, "bm25", {"q3": ["d5", "d6"]}, kind="bm25")
    training_set = training_set_create(project=project, name="s", top=1, inside=1, outside=0)
    assert training_set.parameters["run"] == "new" and sampled(training_set) == {("q2", "d3", "top", 1, "train")}


@pytest.mark.parametrize(("options", "message"), [
    ({"top": 0}, "the top must be at least 1"), ({"inside": -1}, "at least one passage"),
    ({"inside": 0, "outside": 0}, "at least one passage"), ({"outside": 1.5}, "must be integers"),
    ({"held_out": 0.95}, "held-out share"), ({"held_out": -0.1}, "held-out share"), ({"seed": -3}, "seed"),
    ({"name": "taken"}, "already has a training set 'taken'"), ({"name": "  "}, "name"),
])
def test_a_refused_sample_stores_nothing(project, dense, options, message):
    run, _ = dense
    training_set_create(project=project, name="taken", run=run, top=1, inside=1, outside=0)
    before = TrainingSet.objects.count(), TrainingExample.objects.count(), Pair.objects.count()
    with pytest.raises(TrainingSetError, match=message):
        training_set_create(project=project, run=run, **({"name": "new", "top": 2, "inside": 2, "outside": 2}
                                                          | options))
    assert (TrainingSet.objects.count(), TrainingExample.objects.count(), Pair.objects.count()) == before


def test_a_run_of_another_project_is_refused(project):
    other = ProjectFactory()
    QueryFactory(project=other, external_id="q1")
    PassageFactory(project=other, external_id="d1")
    with pytest.raises(TrainingSetError, match="not a run of project 'ts'"):
        training_set_create(project=project, name="s", run=store_run(other, "dense", {"q1": ["d1"]}))


@pytest.mark.parametrize(("name", "groups", "held"), [
    ("asqa_train_data.csv", 4, 1), ("qampari_train_data.csv", 4, 1), ("rag_bench_train_data.csv", 5, 1),
])
def test_each_diras_file_imports_as_file_examples_split_by_question(project, name, groups, held):
    with (DATA / name).open("rb") as handle:
        training_set = training_set_import(project=project, name=name, file=handle, filename=name, held_out=0.2)
    with (DATA / name).open(newline="") as handle:
        expected = read_file_examples(handle, name=name).examples
    stored = list(TrainingExample.objects.filter(training_set=training_set).order_by("id"))
    assert [(e.system, e.user, e.answer, e.teacher_p, e.group, e.origin, e.pair_id) for e in stored] == [
        (x.system, x.user, x.answer, x.p, x.group, "file", None) for x in expected]
    with (DATA / name).open(newline="") as handle:
        questions = {row.get("question") for row in csv.DictReader(handle)}
    assert len({e.group for e in stored}) == groups and (name.startswith("asqa") or {e.group for e in stored} == questions)
    sides = {}
    for example in stored:
        sides.setdefault(example.group, set()).add(example.split)
    assert all(len(side) == 1 for side in sides.values())
    assert sum(side == {"held_out"} for side in sides.values()) == held  # round(0.2 * 4 or 5) = 1
    assert training_set.source == name and training_set.parameters["skipped"] == 0


def bad_file() -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows([["question", "document", "guess", "confidence"], ["q1", "para", "Yes.", "0.9."],
                      ["q1", "para", "Yes", "2"], ["q2", "para", "No", "0.8"]])
    return out.getvalue().encode()


def test_a_bad_file_stores_nothing_or_its_good_rows_when_asked(project):
    with pytest.raises(TrainingSetError, match=r"^bad\.csv:3: the confidence 2 is outside \[0, 1\]$"):
        training_set_import(project=project, name="s", file=io.BytesIO(bad_file()), filename="bad.csv")
    assert not TrainingSet.objects.exists() and not TrainingExample.objects.exists()
    training_set = training_set_import(project=project, name="s", file=io.BytesIO(bad_file()), filename="bad.csv",
                                       skip_bad=True, held_out=0)
    assert list(training_set.examples.values_list("group", "teacher_p")) == [("q1", 0.9), ("q2", pytest.approx(0.2))]
    assert training_set.parameters["skipped"] == 1
    assert training_set.parameters["skipped_rows"] == ["bad.csv:3: the confidence 2 is outside [0, 1]"]


def test_an_oversized_or_undecodable_file_is_refused(project, settings):
    settings.RUN_UPLOAD_MAX_BYTES = 10_000
    with (DATA / "asqa_train_data.csv").open("rb") as handle, pytest.raises(TooLarge, match="RUN_UPLOAD_MAX_BYTES"):
        training_set_import(project=project, name="s", file=handle, filename="asqa.csv")
    with pytest.raises(TrainingSetError, match="not UTF-8"):
        training_set_import(project=project, name="s", file=io.BytesIO(bad_file() + b"q3,\xff,No,1\n"),
                            filename="x.csv")
    assert not TrainingSet.objects.exists() and not TrainingExample.objects.exists()


def test_a_set_in_use_by_a_fine_tuning_job_is_not_deleted(project, dense):
    run, _ = dense
    training_set = training_set_create(project=project, name="s", run=run, top=2, inside=2, outside=1)
    pairs = Pair.objects.count()
    job = FineTuneJob.objects.create(project=project, training_set=training_set, base_model="m", student_name="st")
    with pytest.raises(TrainingSetError, match="used by 1 fine-tuning job"):
        training_set_delete(training_set=training_set)
    job.delete()
    training_set_delete(training_set=training_set)
    assert not TrainingSet.objects.exists() and not TrainingExample.objects.exists()
    assert Pair.objects.count() == pairs  # the pool keeps what the sample brought


def test_the_selectors_count_and_find(project, dense):
    run, _ = dense
    training_set_create(project=project, name="s", run=run, top=3, inside=3, outside=2, held_out=0.25)
    with (DATA / "asqa_train_data.csv").open("rb") as handle:
        training_set_import(project=project, name="f", file=handle, filename="asqa.csv", held_out=0.25)
    counted = {s.name: (s.train_count, s.held_out_count, s.top_count, s.random_count, s.file_count)
               for s in training_sets_of_project(project)}
    # 8 queries, 2 held out, 5 examples each; 4 questions, 1 held out, 5 rows each.
    assert counted == {"s": (30, 10, 24, 16, 0), "f": (15, 5, 0, 0, 20)}
    found = training_set_by_name(project, "s")
    assert {e.split for e in training_examples(found, "held_out")} == {"held_out"}
    assert len(list(training_examples(found))) == 40
    with pytest.raises(NotFound, match=r"no training set 'x' \(its training sets: f, s\)"):
        training_set_by_name(project, "x")


@pytest.fixture(scope="module")
def smollm2():
    return AutoTokenizer.from_pretrained(smollm2_folder(settings.VAR_DIR), local_files_only=True)


def chatml(system: str, user: str) -> str:
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def test_the_jsonl_teaches_the_teachers_answers_in_the_students_template(project, smollm2):
    for query in project.queries.filter(external_id__in=["q1", "q2"]):
        RelevanceDefinitionFactory(query=query, text=f"old meaning of {query.external_id}")
        RelevanceDefinitionFactory(query=query, text=f"what {query.external_id} looks for")
    run = store_run(project, "dense", {"q1": ["d1", "d2", "d3"], "q2": ["d4", "d5", "d6"]})
    training_set = training_set_create(project=project, name="s", run=run, top=3, inside=3, outside=0, held_out=0.5, seed=4)
    pair = {(p.query.external_id, p.passage.external_id): p for p in Pair.objects.select_related("query", "passage")}
    imported = JudgeFactory(project=project, name="gpt4", backend="import")
    JudgmentFactory(pair=pair[("q1", "d1")], judge=imported, p_relevant=0.8)
    JudgmentFactory(pair=pair[("q1", "d2")], judge=imported, p_relevant=0.3)
    JudgmentFactory(pair=pair[("q1", "d3")], judge=imported, status=Judgment.Status.PARSE_ERROR, p_relevant=None)
    JudgmentFactory(pair=pair[("q2", "d4")], judge=imported, p_relevant=0.95)
    # d5, d6 were never judged
    lines = training_set_jsonl(training_set, tokenizer=smollm2, teacher=imported, split=None)
    records = [json.loads(line) for line in lines]
    assert (lines.written, lines.left_out) == (3, 3)
    split_of = dict(TrainingExample.objects.filter(training_set=training_set).values_list("group", "split"))
    assert sorted(split_of.values()) == ["held_out", "train"]
    expected = {("q1", "d1"): "[Guess]: Yes\n\n[Confidence]: 0.80", ("q1", "d2"): "[Guess]: No\n\n[Confidence]: 0.70",
                ("q2", "d4"): "[Guess]: Yes\n\n[Confidence]: 0.95"}
    assert {(r["query"], r["passage"]): r["output"] for r in records} == {
        key: answer + "<|im_end|>\n" for key, answer in expected.items()}
    for record in records:
        p = pair[(record["query"], record["passage"])]
        # The prompt the product's judges use, under the query's current (newest) definition.
        prompt = build_prompt(PairInput(pair_id=p.id, query=p.query.text, passage=p.passage.text, title=p.passage.title,
                                        definition=f"what {record['query']} looks for"),
                              JudgeConfig(backend="hf", model="student", method="tok"))
        assert record["input"] == chatml(prompt.system, prompt.user)
        assert record["split"] == split_of[record["query"]]
    train_only = list(training_set_jsonl(training_set, tokenizer=smollm2, teacher=imported))
    assert {json.loads(line)["split"] for line in train_only} == {"train"}


def test_a_model_judge_teaches_only_under_the_current_definition(project, smollm2):
    query = project.queries.get(external_id="q1")
    old = RelevanceDefinitionFactory(query=query, text="old")
    new = RelevanceDefinitionFactory(query=query, text="new")
    run = store_run(project, "dense", {"q1": ["d1", "d2"]})
    training_set = training_set_create(project=project, name="s", run=run, top=2, inside=2, outside=0, held_out=0)
    d1, d2 = (Pair.objects.get(query=query, passage__external_id=d) for d in ("d1", "d2"))
    teacher = JudgeFactory(project=project, name="llama", backend="hf")
    JudgmentFactory(pair=d1, judge=teacher, definition=new, p_relevant=0.6)
    JudgmentFactory(pair=d2, judge=teacher, definition=old, p_relevant=0.9)
    lines = training_set_jsonl(training_set, tokenizer=smollm2, teacher=teacher)
    assert [json.loads(line)["passage"] for line in lines] == ["d1"] and lines.left_out == 1
    with pytest.raises(TrainingExportError, match="name the teacher"):
        training_set_jsonl(training_set, tokenizer=smollm2)


def test_the_jsonl_of_an_imported_file_keeps_its_prompts(project, smollm2):
    with (DATA / "qampari_train_data.csv").open("rb") as handle:
        training_set = training_set_import(project=project, name="f", file=handle, filename="q.csv", held_out=0)
    with (DATA / "qampari_train_data.csv").open(newline="") as handle:
        expected = read_file_examples(handle, name="q.csv").examples
    records = [json.loads(line) for line in training_set_jsonl(training_set, tokenizer=smollm2)]
    assert [(r["input"], r["output"], r["query"], r["passage"]) for r in records] == [
        (chatml(x.system, x.user), x.answer + "<|im_end|>\n", x.group, None) for x in expected]


def command(*args: str) -> str:
    out = io.StringIO()
    call_command("training_set", "--project", "ts", *args, stdout=out)
    return out.getvalue()


def test_the_command_samples_imports_and_exports(project, dense, tmp_path, smollm2):
    out = command("--name", "s", "--top", "2", "--inside", "2", "--outside", "1", "--seed", "5", "--held-out", "0.25")
    assert "Stored training set 's' (run dense): 18 train and 6 held-out example(s) (16 top, 8 random)." in out
    assert ("Drew 16 passage(s) inside the top 2 (asked 2 per query) and 8 outside it (asked 1) over 8 queries, "
            "seed 5; held-out share 0.25 (as given).") in out
    out = command("--name", "t", "--top", "2", "--outside", "0")
    assert ("Drew 16 passage(s) inside the top 2 (asked 30 per query) and 0 outside it (asked 0) over 8 queries, "
            "seed 0; 8 queries had fewer than asked on a side and gave all they had; held-out share 0.2 "
            "(the default).") in out
    assert "  q1: 2 inside its top, 38 outside it: all taken" in out
    out = command("--name", "f", "--from-file", str(DATA / "rag_bench_train_data.csv"))
    assert "Stored training set 'f' (rag_bench_train_data.csv): 16 train and 4 held-out example(s) (20 file)." in out
    target = tmp_path / "f.jsonl"
    out = command("--name", "f", "--export", str(target), "--student", str(smollm2_folder(settings.VAR_DIR)))
    assert f"Wrote 16 example(s) of 'f' (train) to {target}." in out
    assert len(target.read_text().splitlines()) == 16
    teacher = JudgeFactory(project=project, name="gpt4", backend="import")
    judged = TrainingExample.objects.filter(training_set__name="s", split="train").order_by("id")[:3]
    for example in judged:
        JudgmentFactory(pair=example.pair, judge=teacher, p_relevant=0.7)
    out = command("--name", "s", "--export", str(target), "--student", str(smollm2_folder(settings.VAR_DIR)),
                  "--teacher", "gpt4")
    assert f"Wrote 3 example(s) of 's' (train) to {target}; left out 15 pair(s) that 'gpt4' has not judged ok." in out
    assert [json.loads(line)["output"] for line in target.read_text().splitlines()] == [
        "[Guess]: Yes\n\n[Confidence]: 0.70<|im_end|>\n"] * 3


@pytest.mark.parametrize(("args", "message"), [
    (("--name", "s", "--run", "nope"), "has no run 'nope'"),
    (("--name", "s", "--inside", "0", "--outside", "0"), "at least one passage"),
    (("--name", "s", "--from-file", "missing.csv"), "cannot read missing.csv"),
    (("--name", "s", "--from-file", str(DATA / "asqa_train_data.csv"), "--top", "3"), "--top go with sampling"),
    (("--name", "nope", "--export", "x.jsonl", "--student", "/tmp"), "no training set 'nope'"),
    (("--name", "s", "--teacher", "gpt4"), "go with --export"),
])
def test_the_command_turns_errors_into_command_errors(project, dense, args, message):
    with pytest.raises(CommandError, match=message):
        command(*args)
    assert not TrainingSet.objects.exists()
