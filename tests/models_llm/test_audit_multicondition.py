"""MultiConIR's four tests (models_llm.audit.multicondition) checked by hand on a two-item example, by an oracle
scorer on the example bundle, and its refusals of bad metadata."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from models_llm.audit.multicondition import (
    PAPER_FILLER,
    FillerPadder,
    McRecord,
    multicondition_items,
    multicondition_needs,
    multicondition_report,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "multicondition-example"


def _records(file: str) -> list[McRecord]:
    rows = [json.loads(line) for line in (EXAMPLE / file).read_text().splitlines()]
    return [McRecord(row["_id"], row["text"], row.get("metadata", {})) for row in rows]


def example_items():
    return multicondition_items(_records("queries.jsonl"), _records("corpus.jsonl"))


def _query(key, item, domain, k, style, **extra):
    return McRecord(key, f"text of {key}", {"multicondition": {"item": item, "domain": domain, "k": k,
                                                                "style": style, **extra}})


def _doc(key, item, satisfies):
    return McRecord(key, f"text of {key} " * 3, {"multicondition": {"item": item, "satisfies": satisfies}})


def tiny_items():
    """x (books): K = 2, both styles; y (law): K = 2, instruction only."""
    queries = [_query("xi1", "x", "books", 1, "instruction"), _query("xi2", "x", "books", 2, "instruction"),
               _query("xd1", "x", "books", 1, "descriptive"), _query("xd2", "x", "books", 2, "descriptive"),
               _query("yi1", "y", "law", 1, "instruction"), _query("yi2", "y", "law", 2, "instruction"),
               McRecord("plain", "an ordinary query", {"topic": "other"})]
    docs = [_doc(f"{item}-d{s}", item, s) for item in "xy" for s in range(3)] + [McRecord("p", "plain", {})]
    return multicondition_items(queries, docs)


TINY_SCORES = {
    ("xi1", "x-d2", 0): 0.9, ("xi1", "x-d0", 0): 0.2,
    ("xi2", "x-d2", 0): 0.6, ("xi2", "x-d1", 0): 0.7, ("xi2", "x-d0", 0): 0.1,
    ("xd1", "x-d2", 0): 0.5, ("xd1", "x-d0", 0): 0.5,
    ("xd2", "x-d2", 0): 0.8, ("xd2", "x-d1", 0): 0.3, ("xd2", "x-d0", 0): 0.2,
    ("yi1", "y-d2", 0): 0.4, ("yi1", "y-d0", 0): 0.3,
    ("yi2", "y-d2", 0): 0.7, ("yi2", "y-d1", 0): 0.7, ("yi2", "y-d0", 0): None,
    ("xi2", "x-d2", 512): 0.1, ("xi2", "x-d1", 512): 0.2, ("xi2", "x-d0", 512): 0.05,
    ("yi2", "y-d1", 512): 0.5, ("yi2", "y-d0", 512): 0.6,  # ("yi2", "y-d2", 512) missing: skipped
}


def test_each_task_against_a_hand_computation():
    report = multicondition_report(tiny_items(), TINY_SCORES, subject="judge:hand", pads=[512])
    assert (report["items"], report["domains"], report["max_k"]) == (2, ["books", "law"], 2)
    # Task 1, instruction: x k1 0.9 > 0.2 win, k2 0.6 > 0.7 no; y k1 0.4 > 0.3 win, k2 0.7 > 0.7 tie: no.
    instruction = report["task1"]["styles"]["instruction"]
    assert instruction["by_domain"] == {"books": [1.0, 0.0], "law": [1.0, 0.0]}
    assert instruction["average"] == [1.0, 0.0] and instruction["mean"] == 0.5
    # The paper's Decline: WR at query 1 minus WR at the last query, 1.0 - 0.0.
    assert instruction["decline"] == 1.0
    # Descriptive (x only): k1 0.5 > 0.5 tie: no; k2 0.8 > 0.3 win. Law has no descriptive query.
    descriptive = report["task1"]["styles"]["descriptive"]
    assert descriptive["by_domain"] == {"books": [0.0, 1.0], "law": [None, None]}
    assert descriptive["average"] == [0.0, 1.0] and descriptive["mean"] == 0.5 and descriptive["decline"] == -1.0
    # Mean of the styles' means (0.5 + 0.5) / 2 = 0.5 < 0.7: sensitive.
    assert report["task1"]["mean"] == 0.5 and report["task1"]["verdict"] == "sensitive"
    assert "Decline (instruction, WR at k = 1 minus WR at k = 2): 1.00" in report["task1"]["why"]
    # Task 2 under xi2: d1 0.7 > d0 0.1 win, d2 0.6 > d1 0.7 no; under yi2: d0 missing (skipped), d2 0.7 > d1 0.7 no.
    task2 = report["task2"]
    assert task2["by_domain"] == {"books": [1.0, 0.0], "law": [None, 0.0]}
    assert task2["average"] == [1.0, 0.0] and task2["mean"] == 0.5 and task2["verdict"] == "sensitive"
    # Task 3, the paper's FR on Task 2's comparisons (x only: y has no descriptive query). Under xd2: k1 d1 0.3 > d0
    # 0.2 win, as under xi2: no flip; k2 d2 0.8 > d1 0.3 win, where xi2 lost: a flip.
    task3 = report["task3"]
    assert task3["by_domain"] == {"books": [0.0, 1.0], "law": [None, None]}
    assert task3["average"] == [0.0, 1.0] and task3["mean"] == 0.5 and task3["verdict"] == "sensitive"
    # Task 4, Task 2 with the documents padded to 512 words: xi2 k1 0.2 > 0.05 win, k2 0.1 > 0.2 no; yi2 k1 0.5 > 0.6
    # no, k2 missing (skipped). Pad 0 is Task 2's curve (mean 0.5); at 512 the average is [0.5, 0.0], mean 0.25: a
    # drop of 0.25 > 0.15, sensitive.
    task4 = report["task4"]
    assert task4["title"] == "Longer documents: Task 2 with documents padded to 512 words"
    assert task4["pads"]["0"]["average"] == [1.0, 0.0]
    assert task4["pads"]["512"]["by_domain"] == {"books": [1.0, 0.0], "law": [0.0, None]}
    assert task4["pads"]["512"]["mean"] == 0.25 and task4["verdict"] == "sensitive" and "0.25" in task4["why"]
    # One Task 2 comparison and one Task 4 comparison had a missing score, each counted once.
    assert report["skipped"] == 2
    assert report["examples"] == []  # no query lists its conditions
    json.dumps(report)


def test_verdict_thresholds_between_robust_watch_and_sensitive():
    scores = dict(TINY_SCORES)
    # Task 1 instruction at 3 wins of 4 and descriptive at 2 of 2: (0.75 + 1.0) / 2 = 0.875: watch (0.7 to 0.9).
    scores[("xi2", "x-d1", 0)] = 0.0
    scores[("xd1", "x-d0", 0)] = 0.0
    report = multicondition_report(tiny_items(), scores, subject="judge:hand", pads=[512])
    assert report["task1"]["styles"]["instruction"]["mean"] == 0.75
    assert report["task1"]["mean"] == 0.875 and report["task1"]["verdict"] == "watch"
    # Task 2 under xi2 now loses k1 (0.0 > 0.1 no) and wins k2 (0.6 > 0.0); with xd2's d0 at 0.5 the descriptive
    # query loses k1 too (0.3 > 0.5 no) and wins k2: the styles agree at both k, Flip Rate 0, robust.
    scores[("xd2", "x-d0", 0)] = 0.5
    report = multicondition_report(tiny_items(), scores, subject="judge:hand", pads=[512])
    assert report["task3"]["average"] == [0.0, 0.0] and report["task3"]["verdict"] == "robust"


def _oracle(items):
    """P grows with how many of the query's conditions the document meets (read from the metadata)."""
    k_of = {q.key: q.k for item in items for q in item.queries.values()}
    met = {d.key: d.satisfies for item in items for d in item.documents.values()}
    return {key: min(met[key[1]], k_of[key[0]]) / k_of[key[0]] for key in multicondition_needs(items, [512, 1024])}


def test_an_oracle_scorer_wins_every_comparison_and_never_flips():
    items = example_items()
    report = multicondition_report(items, _oracle(items), subject="judge:oracle", pads=[512, 1024])
    assert (report["items"], report["domains"], report["max_k"], report["skipped"]) == (6, ["books", "recipes"], 5, 0)
    ones = [1.0] * 5
    for style in ("instruction", "descriptive"):
        assert report["task1"]["styles"][style]["by_domain"] == {"books": ones, "recipes": ones}
    assert report["task2"]["average"] == ones and report["task3"]["average"] == [0.0] * 5
    assert all(report["task4"]["pads"][pad]["average"] == ones for pad in ("0", "512", "1024"))
    assert [report[t]["verdict"] for t in ("task1", "task2", "task3", "task4")] == ["robust"] * 4
    spec = json.loads((EXAMPLE / "items.json").read_text())["items"]
    assert report["examples"] == [{"item": item["item"], "domain": item["domain"],
                                   "conditions": [c[0] for c in item["conditions"]]}
                                  for item in (spec[0], spec[3])]


def test_needs_lists_each_comparison_s_scores_once():
    items = example_items()
    # Per item (K = 5, both styles): Task 1 per style 5 queries x {d5, d_(k-1)} = 10 keys, 20 for both; Task 2 under
    # each full query adds d0..d3 (d4, d5 are Task 1's at k = 5): 8; Task 4: the full instruction query on d0..d5
    # per pad, 12. 40 x 6 items.
    needs = multicondition_needs(items, [512, 1024])
    assert len(needs) == len(set(needs)) == 40 * 6
    assert len(multicondition_needs(items, [])) == 28 * 6


def test_the_papers_filler_goes_between_the_sentences_up_to_the_word_count():
    padder = FillerPadder()
    # 8 words in three sentences; 12 more: "The grass is green." into the first gap, "The sky is blue." into the
    # second, "The sun is yellow." into the first again.
    assert padder.pad("A b c. D e f. G h.", 20) == (
        "A b c. The grass is green. The sun is yellow. D e f. The sky is blue. G h.")
    # One sentence: the filler follows it; the last filler sentence is cut at the word count.
    assert padder.pad("Only one sentence here.", 10) == "Only one sentence here. The grass is green. The sky"
    assert padder.pad("A b c. D e f.", 6) == "A b c. D e f." and padder.pad("A b c.", 0) == "A b c."
    # Two documents of an item with as many sentences get the same filler in the same places.
    positive, miss = "Born in Paris. Wrote novels. Won a prize.", "Born in Lyon. Wrote novels. Won a prize."
    fill = [padder.pad(text, 512) for text in (positive, miss)]
    assert [len(text.split()) for text in fill] == [512, 512]
    assert fill[0].replace("Paris", "Lyon") == fill[1]
    assert set(fill[0].split()) - set(positive.split()) <= set(PAPER_FILLER.split())
    assert FillerPadder("Filler here.").pad("A b. C d.", 8) == "A b. Filler here. Filler here. C d."
    with pytest.raises(ValueError, match="at least one word"):
        FillerPadder("   ")


def test_a_run_like_report_says_why_task4_is_unavailable():
    report = multicondition_report(tiny_items(), TINY_SCORES, subject="run:bm25", pads=(), unavailable="fixed")
    assert report["task4"] == {"title": "Longer documents: Task 2 with padded documents", "unavailable": "fixed",
                               "verdict": "no data", "why": "Not measured: fixed."}
    assert report["skipped"] == 1


@pytest.mark.parametrize(("queries", "docs", "named"), [
    ([_query("q1", "x", "books", 0, "instruction")], [], "query 'q1'"),
    ([_query("q1", "x", "books", True, "instruction")], [], "query 'q1'"),
    ([_query("q1", "x", "books", 1, "bullet")], [], "query 'q1'"),
    ([_query("q1", 7, "books", 1, "instruction")], [], "query 'q1'"),
    ([McRecord("q1", "t", {"multicondition": "x"})], [], "query 'q1'"),
    ([_query("q1", "x", "books", 1, "instruction"), _query("q2", "x", "books", 1, "instruction")], [], "'q1'"),
    ([_query("q1", "x", "books", 1, "instruction"), _query("q2", "x", "law", 2, "instruction")], [], "query 'q2'"),
    ([_query("q1", "x", "books", 2, "instruction", conditions=["a"])], [], "query 'q1'"),
    ([_query("q1", "x", "books", 1, "instruction", conditions=["a"]),
      _query("q2", "x", "books", 2, "instruction", conditions=["b", "c"])], [], "query 'q2'"),
    ([_query("q1", "x", "books", 1, "instruction")], [_doc("d1", "zz", 1)], "passage 'd1'"),
    ([_query("q1", "x", "books", 1, "instruction")], [_doc("d1", "x", 2)], "passage 'd1'"),
    ([_query("q1", "x", "books", 1, "instruction")], [_doc("d1", "x", -1)], "passage 'd1'"),
    ([_query("q1", "x", "books", 1, "instruction")], [_doc("d1", "x", 1), _doc("d2", "x", 1)], "passage 'd2'"),
    ([_query("q1", "x", "books", 2, "instruction")], [_doc("d1", "x", 1)], "item 'x' has no positive"),
    ([_query("q1", "x", "books", 1, "instruction", conditions=["a", "b"])], [_doc("d1", "x", 1)], "item 'x' lists 2"),
])
def test_metadata_problems_name_the_query_passage_or_item(queries, docs, named):
    with pytest.raises(ValueError, match=named):
        multicondition_items(queries, docs)
