"""Runs: TREC run files and built-in rankings stored with trec_eval's ranks, every bad line named by file and line
with nothing stored, gzip, deletion, and runs inside a bundle."""
import gzip
import random
from pathlib import Path

import pytest
import pytrec_eval

from labeling.decompress import ExpansionLimits
from labeling.exceptions import NotFound
from labeling.models import PairSource, Run, RunEntry
from labeling.selectors.runs import project_runs, run_by_name, run_rankings, run_top
from labeling.services.bundle_import import BundleImportError, bundle_import
from labeling.services.runs import RunImportError, run_delete, run_import, run_store
from tests.factories import PairSourceFactory, PassageFactory, ProjectFactory, QueryFactory
from tests.services.test_bundle_import import SMALL, table_state, write_bundle

pytestmark = pytest.mark.django_db

# Ids whose string order is not their numeric order (d10 < d2), as trec_eval compares them.
PASSAGES = [f"d{i}" for i in range(1, 13)]
QUERIES = ["q1", "q2", "q3"]


@pytest.fixture
def project():
    project = ProjectFactory()
    for ext in QUERIES:
        QueryFactory(project=project, external_id=ext)
    for ext in PASSAGES:
        PassageFactory(project=project, external_id=ext)
    return project


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def tied_run(seed: int = 1) -> list[tuple[str, str, float]]:
    """(query, doc, score) with many ties (three score values), docs in a shuffled order."""
    rng = random.Random(seed)
    rows = []
    for query in QUERIES:
        docs = rng.sample(PASSAGES, 10)
        rows += [(query, doc, rng.choice([0.0, 0.5, 1.25])) for doc in docs]
    return rows


def trec_lines(rows, tag: str = "sys") -> list[str]:
    # The rank column is written wrong on purpose: trec_eval ignores it, and so must the import.
    return [f"{q} Q0 {d} {99 - i} {s!r} {tag}" for i, (q, d, s) in enumerate(rows)]


def by_hand(rows) -> dict[str, list[str]]:
    """trec_eval's order written out: score descending, then document id descending."""
    ranking: dict[str, list[tuple[float, str]]] = {}
    for q, d, s in rows:
        ranking.setdefault(q, []).append((s, d))
    return {q: [d for _, d in sorted(items, reverse=True)] for q, items in ranking.items()}


def state() -> tuple:
    return Run.objects.count(), RunEntry.objects.count()


def test_ties_are_ranked_as_trec_eval_ranks_them(project, tmp_path):
    rows = tied_run()
    run = run_import(project=project, path=write(tmp_path / "tied.trec", trec_lines(rows)), name="tied")
    stored = run_rankings(run)
    assert stored == by_hand(rows)
    # pytrec_eval on the file's raw scores (it breaks the ties itself) and on our ranks as untied scores give
    # the same per-query measures.
    rng = random.Random(7)
    qrels = {q: {d: rng.choice([0, 0, 1, 2]) for d in PASSAGES} for q in QUERIES}
    measures = {"map", "ndcg", "P_3", "recip_rank", "ndcg_cut_5", "Rprec"}
    raw = {q: {} for q in QUERIES}
    for q, d, s in rows:
        raw[q][d] = s
    ours = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in stored.items()}
    evaluate = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate
    assert evaluate(raw) == evaluate(ours)
    # The check has teeth: breaking the ties the other way (ids ascending) changes the measures.
    other = {q: {d: float(len(docs) - i) for i, d in enumerate(sorted(docs, key=lambda d: (-raw[q][d], d)))}
             for q, docs in stored.items()}
    assert evaluate(other) != evaluate(raw)


def test_counts_tag_source_and_entries(project, tmp_path):
    rows = tied_run()
    run = run_import(project=project, path=write(tmp_path / "bm25.txt", trec_lines(rows, tag="BM25-x")), name=" bm25 ",
                     description="plain BM25")
    assert (run.name, run.kind, run.queries, run.entries, run.depth) == ("bm25", "imported", 3, 30, 10)
    assert run.parameters == {"tag": "BM25-x"} and run.source == "bm25.txt" and run.description == "plain BM25"
    assert list(project_runs(project)) == [run] and run_by_name(project=project, name="bm25") == run
    entries = RunEntry.objects.filter(run=run)
    scores = {(e.query.external_id, e.passage.external_id): e.score for e in entries.select_related("query", "passage")}
    assert scores == {(q, d): s for q, d, s in rows}
    top = list(run_top(run, 2))
    expected = by_hand(rows)
    assert [(e_q, e_p, r) for e_q, e_p, r in top] == [
        (project.queries.get(external_id=q).id, project.passages.get(external_id=d).id, rank)
        for q in QUERIES for rank, d in enumerate(expected[q][:2], start=1)
    ]


def test_gzip_run_is_the_same_run(project, tmp_path):
    rows = tied_run(seed=3)
    text = "".join(line + "\n" for line in trec_lines(rows))
    plain = run_import(project=project, path=write(tmp_path / "a.trec", trec_lines(rows)), name="plain")
    (tmp_path / "a.trec.gz").write_bytes(gzip.compress(text.encode()))
    packed = run_import(project=project, path=tmp_path / "a.trec.gz", name="packed")
    assert run_rankings(packed) == run_rankings(plain) == by_hand(rows)


def test_a_broken_gzip_file_is_a_problem(project, tmp_path):
    data = gzip.compress(("q1 Q0 d1 1 1.0 t\n" * 1000).encode())
    (tmp_path / "cut.trec.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(RunImportError, match=r"cut\.trec\.gz: cannot be read"):
        run_import(project=project, path=tmp_path / "cut.trec.gz", name="cut")
    assert state() == (0, 0)


GOOD = "q1 Q0 d1 1 2.5 t"
BAD_LINES = [
    ("q1 Q0 d2 2 1.0", "expected 6 columns (qid Q0 docid rank score tag), got 5"),
    ("q1 Q0 d2 2 1.0 t extra", "expected 6 columns (qid Q0 docid rank score tag), got 7"),
    ("q1 Q0 d2 2 high t", "score must be a number, got 'high'"),
    ("q1 Q0 d2 2 inf t", "score must be finite, got 'inf'"),
    ("q1 Q0 d2 2 nan t", "score must be finite, got 'nan'"),
    ("q9 Q0 d2 2 1.0 t", "unknown query 'q9'"),
    ("q1 Q0 d99 2 1.0 t", "unknown passage 'd99'"),
    ("q1 Q0 d1 2 1.0 t", "passage 'd1' is ranked twice for query 'q1' (first at line 1)"),
    ("q1 Q0 d2 2 1.0 other", "run tag 'other' differs from 't' (line 1): one run per file"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES, ids=[message for _, message in BAD_LINES])
def test_each_bad_line_is_named_and_nothing_is_stored(project, tmp_path, line, message):
    run_import(project=project, path=write(tmp_path / "ok.trec", [GOOD]), name="kept")
    before = state()
    path = write(tmp_path / "bad.trec", [GOOD, "q2 Q0 d3 1 1.0 t", "", line, "q2 Q0 d4 2 0.5 t"])
    with pytest.raises(RunImportError) as caught:
        run_import(project=project, path=path, name="bad")
    assert f"bad.trec:4: {message}" in str(caught.value)
    assert caught.value.problems.total == 1
    assert state() == before and not Run.objects.filter(name="bad").exists()


def test_an_empty_file_and_a_taken_name_are_problems(project, tmp_path):
    run_import(project=project, path=write(tmp_path / "ok.trec", [GOOD]), name="taken")
    before = state()
    with pytest.raises(RunImportError, match=r"empty\.trec: no ranking lines: the run is empty"):
        run_import(project=project, path=write(tmp_path / "empty.trec", ["", "  "]), name="empty")
    with pytest.raises(RunImportError, match=r"again\.trec: a run named 'taken' exists"):
        run_import(project=project, path=write(tmp_path / "again.trec", [GOOD]), name="taken")
    with pytest.raises(RunImportError, match="missing.trec: cannot be read"):
        run_import(project=project, path=tmp_path / "missing.trec", name="missing")
    assert state() == before


def test_a_run_name_is_one_line_stored_nfkc_normalised(project, tmp_path):
    """Issue 30: a line break in a run's name is a problem naming it; accents and inner spaces are kept, in the
    one form NFKC gives them."""
    before = state()
    with pytest.raises(RunImportError, match=r"nl\.trec: the run name holds a control character \(U\+000A\) at "
                                             r"position 3"):
        run_import(project=project, path=write(tmp_path / "nl.trec", [GOOD]), name="nl\nrun")
    assert state() == before
    run = run_import(project=project, path=write(tmp_path / "ok.trec", [GOOD]), name=" BM25 re\u0301gle\u0301 ")
    assert run.name == "BM25 réglé"
    with pytest.raises(RunImportError, match="a run named 'BM25 réglé' exists"):
        run_import(project=project, path=write(tmp_path / "ok.trec", [GOOD]), name="\uff22\uff2d25 réglé")


def test_every_problem_is_counted_and_the_first_twenty_shown(project, tmp_path):
    path = write(tmp_path / "many.trec", [f"q1 Q0 x{i} {i} 1.0 t" for i in range(1, 31)])
    with pytest.raises(RunImportError) as caught:
        run_import(project=project, path=path, name="many")
    message = str(caught.value)
    assert caught.value.problems.total == 30 and "many.trec:20: unknown passage 'x20'" in message
    assert "many.trec:21:" not in message and "... and 10 more problems" in message


def test_ids_of_another_project_are_unknown(project, tmp_path):
    other = ProjectFactory()
    QueryFactory(project=other, external_id="q7")
    with pytest.raises(RunImportError, match=r"x\.trec:1: unknown query 'q7'"):
        run_import(project=project, path=write(tmp_path / "x.trec", ["q7 Q0 d1 1 1.0 t"]), name="x")


def test_run_store_ranks_as_imports_do(project, tmp_path):
    rows = tied_run(seed=5)
    qid = {q.external_id: q.id for q in project.queries.all()}
    pid = {p.external_id: p.id for p in project.passages.all()}
    rankings = {}
    for q, d, s in rows:
        rankings.setdefault(q, ([], []))
        rankings[q][0].append(pid[d])
        rankings[q][1].append(s)
    run = run_store(project=project, name="bm25", kind="bm25", parameters={"k1": 0.9},
                    rankings=[(qid[q], ids, scores) for q, (ids, scores) in rankings.items()], source="job 3")
    assert run_rankings(run) == by_hand(rows)
    assert (run.kind, run.parameters, run.source, run.entries, run.depth) == ("bm25", {"k1": 0.9}, "job 3", 30, 10)


def test_run_store_refuses_bad_rankings_and_stores_nothing(project):
    q1, q2 = (project.queries.get(external_id=q).id for q in ("q1", "q2"))
    d1, d2 = (project.passages.get(external_id=d).id for d in ("d1", "d2"))
    foreign = PassageFactory().id
    bad = [
        (q1, [d1, d2], [1.0, 0.5]),
        (q1, [d1], [1.0]),
        (q2, [d1, d1], [1.0, 0.5]),
        (q2, [d1, foreign], [1.0, 0.5]),
        (q2, [d1, d2], [1.0, float("nan")]),
        (q2, [d1, d2], [1.0]),
        (QueryFactory().id, [d1], [1.0]),
    ]
    with pytest.raises(RunImportError) as caught:
        run_store(project=project, name="x", kind="dense", rankings=bad, parameters={})
    message = str(caught.value)
    for expected in (f"query {q1}: ranked twice", f"query {q2}: a passage ranked twice",
                     f"query {q2}: passages [{foreign}] are not in project", f"query {q2}: a score that is not finite",
                     f"query {q2}: 2 passage ids but 1 scores", "not a query of project"):
        assert expected in message
    with pytest.raises(RunImportError, match="kind: must be one of"):
        run_store(project=project, name="y", kind="splade", rankings=[], parameters={})
    assert state() == (0, 0)


def test_delete_removes_the_entries_and_keeps_the_provenance(project, tmp_path):
    run = run_import(project=project, path=write(tmp_path / "a.trec", trec_lines(tied_run())), name="a")
    source = PairSourceFactory(pair__project=project, pair__query=project.queries.first(),
                               pair__passage=project.passages.first(), system="a", rank=1)
    run_delete(run=run)
    assert state() == (0, 0) and PairSource.objects.filter(id=source.id).exists()
    with pytest.raises(NotFound, match=r"has no run 'a' \(its runs: none\)"):
        run_by_name(project=project, name="a")


# Runs inside a bundle: runs/<name>.trec or .trec.gz, checked with everything else, stored in the same transaction.
BUNDLE_RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 3.0 r\nq2 Q0 d3 1 1.0 r\n"


def test_a_bundle_stores_its_runs_and_a_reimport_writes_nothing(tmp_path):
    files = {**SMALL, "runs/bm25.trec": BUNDLE_RUN, "runs/dense.trec.gz": gzip.compress(b"q2 Q0 d1 1 0.5 r\n")}
    root = write_bundle(tmp_path / "b", files)
    report = bundle_import(path=root, project_slug="withruns")
    assert report.written["runs"] == 2 and report.written["run entries"] == 4
    bm25 = Run.objects.get(name="bm25")
    assert run_rankings(bm25) == {"q1": ["d2", "d1"], "q2": ["d3"]} and bm25.source == "runs/bm25.trec"
    assert run_rankings(Run.objects.get(name="dense")) == {"q2": ["d1"]}
    assert not bundle_import(path=root, project_slug="withruns").changed


def test_a_bad_run_line_fails_the_whole_bundle(tmp_path):
    root = write_bundle(tmp_path / "b", {**SMALL, "runs/bm25.trec": BUNDLE_RUN + "q1 Q0 nowhere 3 1.0 r\n"})
    before = table_state(), state()
    with pytest.raises(BundleImportError, match=r"runs/bm25\.trec:4: unknown passage 'nowhere'"):
        bundle_import(path=root, project_slug="withruns")
    assert (table_state(), state()) == before


def test_a_bundle_run_whose_file_name_is_not_one_line_is_a_problem(tmp_path):
    root = write_bundle(tmp_path / "b", {**SMALL, "runs/nl\nrun.trec": BUNDLE_RUN})
    before = table_state(), state()
    with pytest.raises(BundleImportError, match=r"the run name holds a control character \(U\+000A\) at position 3: "
                                                r".* \(a run is named after its file, without \.trec\)"):
        bundle_import(path=root, project_slug="withruns")
    assert (table_state(), state()) == before


def test_a_bundle_run_that_differs_from_a_stored_one_is_a_problem(tmp_path):
    bundle_import(path=write_bundle(tmp_path / "b", {**SMALL, "runs/bm25.trec": BUNDLE_RUN}), project_slug="p")
    before = table_state(), state()
    changed = write_bundle(tmp_path / "c", {**SMALL, "runs/bm25.trec": BUNDLE_RUN.replace("1.0", "2.0")})
    with pytest.raises(BundleImportError, match=r"runs/bm25\.trec: a run named 'bm25' exists"):
        bundle_import(path=changed, project_slug="p")
    twice = write_bundle(tmp_path / "d", {**SMALL, "runs/x.trec": BUNDLE_RUN, "runs/x.trec.gz": gzip.compress(b"")})
    with pytest.raises(BundleImportError, match=r"runs/x\.trec\.gz: a second run named 'x' \(after runs/x\.trec\)"):
        bundle_import(path=twice, project_slug="p")
    assert (table_state(), state()) == before


# An uploaded .gz, alone or in an uploaded bundle, is read within the upload's expansion limits (the settings'
# defaults here): 20 MB of newlines in 20 KB is a bomb, refused as a problem of its file.
UPLOAD_LIMITS = ExpansionLimits(max_bytes=8 << 30, max_ratio=200)
NEWLINES = gzip.compress(b"q1 Q0 d1 1 1.0 t\n" + b"\n" * (20 << 20))


def test_an_uploaded_gzip_bomb_is_a_problem_of_its_file_and_nothing_is_stored(project, tmp_path):
    path = tmp_path / "bomb.trec.gz"
    path.write_bytes(NEWLINES)
    with pytest.raises(RunImportError, match=r"\nbomb\.trec\.gz: unpacks to more than 200 times its compressed size "
                                             r"\(BUNDLE_MAX_RATIO\)"):
        run_import(project=project, path=path, name="bomb", expand_limits=UPLOAD_LIMITS)
    assert state() == (0, 0)


def test_a_gzip_bomb_run_in_an_uploaded_bundle_fails_the_bundle(tmp_path):
    root = write_bundle(tmp_path / "b", {**SMALL, "runs/bm25.trec.gz": NEWLINES})
    before = table_state(), state()
    with pytest.raises(BundleImportError, match=r"runs/bm25\.trec\.gz: unpacks to more than 200 times"):
        bundle_import(path=root, project_slug="withruns", expand_limits=UPLOAD_LIMITS)
    assert (table_state(), state()) == before
