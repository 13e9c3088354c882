"""The perturbation report: a scorer that prefers longer passages is caught by the length rows, one that counts query
words by stuffing, one that only looks at which pair it is asked about is robust everywhere; the figures match a
hand computation, and the intervals scipy's percentile bootstrap."""
import numpy as np
import pytest
from scipy.stats import bootstrap

from models_llm.audit import (
    PERTURBATION_TESTS,
    RowFigures,
    change_excerpt,
    content_words,
    overall_verdict,
    perturbation_probes,
    robustness_report,
    row_figures,
    row_verdict,
)
from models_llm.types import Verdict as Answer
from tests.models_llm.test_audit_perturb import corpus


def answer(probe, p):
    return Answer(pair_id=probe.pair.pair_id, status="ok", method="tok", p=p, raw_output=f"P={p:.3f}")


def audit(scorer, *, tests=PERTURBATION_TESTS, queries=5, per_query=8):
    items, others = corpus(queries=queries, per_query=per_query)
    probes = perturbation_probes(items, others, tests=tests, seed=0)
    answers = [answer(probe, scorer(probe)) for probe in probes]
    report = robustness_report(judge="x", probes=probes, answers=answers, tests=tests, sample=len(items), seed=0)
    return report, {row["test"]: row for row in report["rows"]}


def test_a_scorer_preferring_longer_passages_is_caught_by_the_length_rows():
    report, rows = audit(lambda probe: min(1.0, len(probe.pair.passage.split()) / 1100))
    assert list(rows) == ["length512", "length1024", "stuffing", "injection", "definition", "consistency"]
    assert rows["length512"]["verdict"] == rows["length1024"]["verdict"] == "sensitive"
    assert rows["length1024"]["decision_flips"] == 1.0  # passages of 40-120 words (P <= 0.11) padded to P = 0.93
    for test in ("definition", "consistency"):
        assert rows[test]["verdict"] == "robust" and rows[test]["mean_delta"] == 0
    assert report["verdict"] == "sensitive" and report["items"] == 40


def test_a_scorer_counting_query_words_is_caught_by_stuffing_only():
    def count(probe):
        words = set(content_words(probe.pair.query))
        return min(1.0, 0.1 + 0.15 * sum(word.lower().strip(".?") in words for word in probe.pair.passage.split()))

    _, rows = audit(count)
    stuffing = rows["stuffing"]
    assert stuffing["verdict"] == "sensitive"
    # Each query has 4 content words (firm, assess, <hazard>, exposure), stuffed twice: P 0.1 -> min(1, 0.1 + 1.2)
    assert stuffing["mean_delta"] == pytest.approx(0.9) and stuffing["decision_flips"] == 1.0
    for test in ("length512", "length1024", "injection", "definition", "consistency"):
        assert rows[test]["verdict"] == "robust", rows[test]["why"]
    worst = stuffing["worst"]
    assert len(worst) == 5 and all(w["delta"] == pytest.approx(0.9) for w in worst)
    assert all(len(w["excerpt"]) <= 300 and w["raw_before"] == "P=0.100" for w in worst)
    assert any(word in worst[0]["excerpt"] for word in ("firm", "assess", "exposure"))


def test_a_scorer_looking_only_at_the_original_pair_is_robust():
    items, _ = corpus(queries=5, per_query=8)
    table = {item.item: (int(item.item) * 37 % 100) / 100 for item in items}  # fixed P per original pair
    report, rows = audit(lambda probe: table[probe.item])
    for row in rows.values():
        assert row["verdict"] == "robust" and row["mean_delta"] == 0 and row["decision_flips"] == 0
        assert row["ordering_flips"] in (0, None) and row["worst"] == []  # nothing moved: no worst example
    assert report["verdict"] == "robust"


def test_hand_computed_figures_on_four_items():
    # Query q1: items A, B, C; query q2: item D alone.
    before = [0.8, 0.4, 0.6, 0.3]
    after = [0.3, 0.5, 0.7, 0.55]
    figures = row_figures(before, after, ["q1", "q1", "q1", "q2"], threshold=0.5, seed=0, draws=200)
    # deltas -0.5, +0.1, +0.1, +0.25: mean -0.05 / 4
    assert figures.mean_delta == pytest.approx(-0.0125)
    # decisions at 0.5, before T F T F, after F T T T: A, B and D flip
    assert figures.decision_flips == pytest.approx(0.75)
    # q1 pairs: (A,B) + -> - flip; (A,C) + -> - flip; (B,C) - -> - kept. q2: no pair.
    assert figures.orderings == 3 and figures.ordering_flips == pytest.approx(2 / 3)
    assert figures.n == 4


def test_ties_count_as_an_order_of_their_own():
    # A tie that comes apart flips, a tie that stays does not, an order that becomes a tie flips.
    before = [0.5, 0.5, 0.5]
    after = [0.4, 0.6, 0.4]
    # (1,2): sign(0)=0 -> sign(-0.2)=-1 flip; (1,3): 0 -> 0 kept; (2,3): 0 -> +1 flip
    assert row_figures(before, after, ["q"] * 3).ordering_flips == pytest.approx(2 / 3)
    assert row_figures([0.2, 0.7], [0.5, 0.5], ["q", "q"]).ordering_flips == 1.0  # - -> 0


def test_intervals_are_scipys_percentile_bootstrap_over_items_and_a_query_bootstrap_by_hand():
    rng = np.random.default_rng(5)
    n, seed, draws = 40, 11, 1000
    before, after = rng.uniform(size=n), rng.uniform(size=n)
    groups = [f"q{i % 6}" for i in range(n)]
    figures = row_figures(before, after, groups, seed=seed, draws=draws)
    for values, ci in (((after - before), figures.mean_delta_ci),
                       (((before >= 0.5) != (after >= 0.5)).astype(float), figures.decision_flips_ci)):
        reference = bootstrap((values,), np.mean, n_resamples=draws, method="percentile", confidence_level=0.95,
                              rng=np.random.default_rng(seed), vectorized=True).confidence_interval
        assert ci == pytest.approx((reference.low, reference.high), abs=1e-12)
    # Orderings: the same generator, after the item draws, resamples the 6 queries; per draw the share is
    # (sum of flipped pairs of the drawn queries) / (sum of their pairs).
    hand = np.random.default_rng(seed)
    hand.integers(0, n, (draws, n))
    drawn_queries = hand.integers(0, 6, (draws, 6))
    per_query = []
    for q in range(6):
        idx = [i for i in range(n) if groups[i] == f"q{q}"]
        flipped = total = 0
        for x in range(len(idx)):
            for y in range(x + 1, len(idx)):
                i, j = idx[x], idx[y]
                total += 1
                flipped += np.sign(before[i] - before[j]) != np.sign(after[i] - after[j])
        per_query.append((flipped, total))
    shares = [sum(per_query[q][0] for q in row) / sum(per_query[q][1] for q in row) for row in drawn_queries]
    assert figures.ordering_flips == pytest.approx(sum(f for f, _ in per_query) / sum(t for _, t in per_query))
    assert figures.ordering_flips_ci == pytest.approx(tuple(np.percentile(shares, [2.5, 97.5])), abs=1e-12)


def figures(mean, flips, n=10):
    return RowFigures(n, mean, None, flips, None, None, None, 0)


@pytest.mark.parametrize(("mean", "flips", "verdict"), [
    (0.05, 0.05, "robust"), (-0.05, 0.0, "robust"), (0.051, 0.0, "watch"), (0.0, 0.15, "watch"),
    (-0.151, 0.0, "sensitive"), (0.0, 0.16, "sensitive"),
])
def test_verdict_thresholds(mean, flips, verdict):
    assert row_verdict(figures(mean, flips))[0] == verdict


def test_no_data_and_the_overall_verdict():
    assert row_verdict(figures(None, None, n=0))[0] == "no data"
    assert overall_verdict(["robust", "no data", "watch"]) == "watch"
    assert overall_verdict(["robust", "sensitive", "watch"]) == "sensitive"
    assert overall_verdict(["no data", "no data"]) == "no data"


def test_an_answer_without_p_leaves_its_item_out():
    items, others = corpus(queries=2, per_query=3)
    probes = perturbation_probes(items, others, tests=["definition"], seed=0)
    answers = [answer(probe, 0.3) for probe in probes]
    first_definition = next(i for i, p in enumerate(probes) if p.role == "definition")
    answers[first_definition] = Answer(pair_id=first_definition, status="parse_error", method="ask", raw_output="?")
    report = robustness_report(judge="x", probes=probes, answers=answers, tests=["definition"], sample=6, seed=0)
    (row,) = report["rows"]
    # q0 has no definition (3 items not measured), q1's 3 items have one, and one of those answered without P
    assert (row["n"], row["failed"]) == (2, 1)
    assert "3 item(s) not measured: their query has no definition" in row["note"]
    assert "1 item(s) left out" in row["why"]


def test_excerpt_starts_near_the_change():
    before = "a" * 500
    after = "a" * 400 + "CHANGED" + "b" * 400
    excerpt = change_excerpt(before, after)
    assert len(excerpt) == 300 and excerpt.startswith("…") and excerpt.endswith("…")
    assert excerpt.index("CHANGED") == 81  # the ellipsis, then the 80 characters before the change
    assert change_excerpt("same text", "same text") == "same text"
