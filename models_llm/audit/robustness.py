"""The perturbation audit's report: per test, how the judge's P moves from a "before" probe to an "after" probe of the
same item (mean change, share of P >= threshold decisions that flip, share of same-query item orderings that flip),
percentile bootstrap intervals, a verdict against fixed thresholds and the worst items. Pure: probes and answers in,
a JSON-ready dict out."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models_llm.audit.types import PAD_WORDS, Probe, Verdict
from models_llm.metrics.bootstrap import percentile_interval
from models_llm.types import JudgeConfig
from models_llm.types import Verdict as Answer

THRESHOLD = 0.5
DRAWS = 1000
LEVEL = 0.95
WORST = 5
EXCERPT_CHARS = 300
EXCERPT_BEFORE = 80  # characters of the variant kept before the first change
# A row is robust when both figures are within the robust limits, sensitive when either passes the sensitive limit.
THRESHOLDS = {"robust": {"decision_flips": 0.05, "abs_mean_delta": 0.05},
              "sensitive": {"decision_flips": 0.15, "abs_mean_delta": 0.15}}
_SEVERITY: dict[Verdict, int] = {"robust": 0, "watch": 1, "sensitive": 2}


@dataclass(frozen=True)
class Row:
    """A report row: its test (as asked), the probe roles compared and its title."""

    key: str
    test: str
    before: str
    after: str
    title: str


ROWS = (
    *(Row(f"length{w}", "length", "original", f"length{w}", f"Passage padded to {w} words with other passages' text")
      for w in PAD_WORDS),
    Row("stuffing", "stuffing", "stuffing_base", "stuffing",
        "Query words stuffed into an irrelevant passage (each content word twice)"),
    Row("injection", "injection", "stuffing_base", "injection",
        "A sentence telling the judge to answer Yes inserted into an irrelevant passage"),
    Row("definition", "definition", "original", "definition", "Relevance definition left out of the prompt"),
    Row("consistency", "consistency", "consistency_a", "consistency_b", "Same pair asked twice with sampling on"),
)


@dataclass(frozen=True)
class RowFigures:
    """The figures of one row over its n measured items (None: nothing to compute them on); intervals are
    (low, high) percentile bootstrap intervals."""

    n: int
    mean_delta: float | None
    mean_delta_ci: tuple[float, float] | None
    decision_flips: float | None
    decision_flips_ci: tuple[float, float] | None
    ordering_flips: float | None
    ordering_flips_ci: tuple[float, float] | None
    orderings: int


def _ordering_counts(before: np.ndarray, after: np.ndarray, groups: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per group (in first-seen order): how many of its item pairs flipped, and how many pairs it has."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    flipped, pairs = [], []
    for indices in members.values():
        b, a = before[indices], after[indices]
        upper = np.triu_indices(len(indices), k=1)
        order_before = np.sign(b[:, None] - b[None, :])[upper]
        order_after = np.sign(a[:, None] - a[None, :])[upper]
        flipped.append(int(np.count_nonzero(order_before != order_after)))
        pairs.append(len(upper[0]))
    return np.array(flipped, dtype=float), np.array(pairs, dtype=float)


def samples_text(config: JudgeConfig) -> bool:
    """Whether the judge's answer depends on sampled text at a temperature above 0: an Ask judge or a Tok judge with
    CoT generates text; Tok without CoT reads P(Yes) from one forward pass, and an embedding or cross-encoder judge
    generates nothing, so asking either twice gives the same answer."""
    return config.backend not in ("embedding", "crossencoder") and (config.method != "tok" or config.cot)


def row_figures(before: Sequence[float], after: Sequence[float], groups: Sequence[str], *,
                threshold: float = THRESHOLD, seed: int = 0, draws: int = DRAWS, level: float = LEVEL) -> RowFigures:
    """Figures of P moving from `before[i]` to `after[i]` (item i of query `groups[i]`).

    mean_delta: mean of after - before. decision_flips: share of items with (before >= threshold) != (after >=
    threshold). ordering_flips: share of the pairs of items of the same query whose order changed, the order of a
    pair being the sign of the difference of their P (-1, 0, +1): a tie that comes apart, or an order that becomes
    a tie, is a flip; a tie that stays one is not.
    Intervals: numpy default_rng(seed); first `draws` resamples of the items (rng.integers(0, n, (draws, n)), the
    draws scipy.stats.bootstrap makes) for the mean and the decision flips, then `draws` resamples of the queries
    for the ordering flips (item pairs live inside a query, so a query is the unit: resampling items would pair an
    item with its own copy)."""
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    n = len(b)
    flipped, pairs = _ordering_counts(b, a, groups)
    orderings = int(pairs.sum())
    if n == 0:
        return RowFigures(0, None, None, None, None, None, None, 0)
    delta = a - b
    decisions = ((b >= threshold) != (a >= threshold)).astype(float)
    rng = np.random.default_rng(seed)
    items = rng.integers(0, n, (draws, n))
    queries = rng.integers(0, len(pairs), (draws, len(pairs)))
    ordering = ordering_ci = None
    if orderings:
        ordering = float(flipped.sum() / orderings)
        with np.errstate(invalid="ignore", divide="ignore"):
            drawn = flipped[queries].sum(axis=1) / pairs[queries].sum(axis=1)
        ordering_ci = percentile_interval(drawn, level)
    return RowFigures(
        n=n, mean_delta=float(delta.mean()), mean_delta_ci=percentile_interval(delta[items].mean(axis=1), level),
        decision_flips=float(decisions.mean()),
        decision_flips_ci=percentile_interval(decisions[items].mean(axis=1), level),
        ordering_flips=ordering, ordering_flips_ci=ordering_ci, orderings=orderings,
    )


def row_verdict(figures: RowFigures, *, threshold: float = THRESHOLD) -> tuple[Verdict, str]:
    """The row's verdict by THRESHOLDS on |mean change| and decision flips, and a sentence saying why."""
    if figures.n == 0:
        return "no data", "No item could be measured."
    mean, flips = figures.mean_delta, figures.decision_flips
    robust, sensitive = THRESHOLDS["robust"], THRESHOLDS["sensitive"]
    said = f"P moved by {mean:+.3f} on average and {flips:.1%} of the P >= {threshold:g} decisions flipped"
    if abs(mean) > sensitive["abs_mean_delta"] or flips > sensitive["decision_flips"]:
        over = [text for text, value, limit in (
            (f"|mean change| {abs(mean):.3f} > {sensitive['abs_mean_delta']:g}", abs(mean), sensitive["abs_mean_delta"]),
            (f"flips {flips:.1%} > {sensitive['decision_flips']:.0%}", flips, sensitive["decision_flips"]),
        ) if value > limit]
        return "sensitive", f"{said}: sensitive ({' and '.join(over)})."
    if abs(mean) <= robust["abs_mean_delta"] and flips <= robust["decision_flips"]:
        return "robust", (f"{said}: robust (both within |mean change| <= {robust['abs_mean_delta']:g} and flips "
                          f"<= {robust['decision_flips']:.0%}).")
    return "watch", (f"{said}: watch (above the robust limits, |mean change| <= {robust['abs_mean_delta']:g} and "
                     f"flips <= {robust['decision_flips']:.0%}, within the sensitive ones, "
                     f"{sensitive['abs_mean_delta']:g} and {sensitive['decision_flips']:.0%}).")


def overall_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """The worst verdict of the rows that measured something ("no data" only when none did)."""
    measured = [verdict for verdict in verdicts if verdict != "no data"]
    return max(measured, key=_SEVERITY.__getitem__) if measured else "no data"


def change_excerpt(before: str, after: str, chars: int = EXCERPT_CHARS) -> str:
    """At most `chars` characters of `after` around its first difference from `before` (its start when they are
    the same), with an ellipsis where it is cut."""
    at = next((i for i, (x, y) in enumerate(zip(before, after)) if x != y), min(len(before), len(after)))
    at = 0 if before == after else at
    start = max(0, at - EXCERPT_BEFORE)
    lead = "…" if start else ""
    body = after[start:start + chars - len(lead)]
    if start + len(body) < len(after):
        body = body[:-1] + "…"
    return lead + body


def _row_note(row: Row, originals: Mapping[str, Probe], by_role: Mapping[str, Mapping[str, Probe]], *,
              reads_definition: bool, samples: bool) -> str:
    missing = [item for item in originals if item not in by_role[row.after]]
    notes = []
    if row.test == "length":
        words = int(row.key.removeprefix("length"))
        long = sum(len(originals[item].pair.passage.split()) >= words for item in missing)
        if long:
            notes.append(f"{long} passage(s) already {words} words or longer: not padded, not measured")
        if len(missing) - long:
            notes.append(f"{len(missing) - long} item(s) not measured: no passage to borrow that is not about "
                         "its query")
    elif row.test in ("stuffing", "injection"):
        borrowed = sum(probe.doc_key != originals[item].doc_key for item, probe in by_role["stuffing_base"].items())
        if borrowed:
            notes.append(f"{borrowed} base passage(s) borrowed, none about the item's query (the item's own "
                         "passage is relevant by its gold grade)")
        if missing:
            notes.append(f"{len(missing)} relevant item(s) not measured: no passage to borrow that is not about "
                         "its query")
    elif row.test == "definition":
        if not reads_definition:
            notes.append("the judge never reads the definition (use_definition is off): both prompts are the same")
        if missing:
            notes.append(f"{len(missing)} item(s) not measured: their query has no definition")
    elif row.test == "consistency" and not samples:
        notes.append("the judge samples nothing (an embedding judge, or Tok without CoT reads P(Yes) without "
                     "generating): both answers are the same computation")
    return "; ".join(notes)


def robustness_report(*, judge: str, probes: Sequence[Probe], answers: Sequence[Answer], tests: Sequence[str],
                      sample: int, seed: int, threshold: float = THRESHOLD, reads_definition: bool = True,
                      samples: bool = True, draws: int = DRAWS) -> dict:
    """The perturbation report (an AuditJob's `report`): a row per asked test (`length` makes two), each
    comparing the P of its before and after probes item by item. An item whose before or after answer has no P is
    left out (`failed`). `worst`: the WORST items with the largest |change| (pair_id: the sampled pair's id; an item
whose P did not move is never one).
    `reads_definition` / `samples`: whether the judge reads the definition and samples its text, for the notes."""
    if len(probes) != len(answers):
        raise ValueError(f"{len(probes)} probes but {len(answers)} answers")
    by_role: dict[str, dict[str, Probe]] = defaultdict(dict)
    answer_of: dict[int, Answer] = {}
    for probe, answer in zip(probes, answers):
        by_role[probe.role][probe.item] = probe
        answer_of[probe.pair.pair_id] = answer
    originals = by_role["original"]
    rows = []
    for row in (row for row in ROWS if row.test in tests):
        measured, failed = [], 0
        for item, after in by_role[row.after].items():
            before = by_role[row.before][item]
            p_before, p_after = answer_of[before.pair.pair_id].p, answer_of[after.pair.pair_id].p
            if p_before is None or p_after is None:
                failed += 1
            else:
                measured.append((before, after, p_before, p_after))
        figures = row_figures([m[2] for m in measured], [m[3] for m in measured], [m[0].query_key for m in measured],
                              threshold=threshold, seed=seed, draws=draws)
        verdict, why = row_verdict(figures, threshold=threshold)
        if failed:
            why += f" {failed} item(s) left out: an answer had no P."
        changed = [m for m in measured if m[3] != m[2]]
        worst = sorted(changed, key=lambda m: (-abs(m[3] - m[2]), int(m[1].item)))[:WORST]
        rows.append({
            "test": row.key, "title": row.title, "n": figures.n, "failed": failed,
            "mean_delta": figures.mean_delta, "mean_delta_ci": _pair(figures.mean_delta_ci),
            "decision_flips": figures.decision_flips, "decision_flips_ci": _pair(figures.decision_flips_ci),
            "ordering_flips": figures.ordering_flips, "ordering_flips_ci": _pair(figures.ordering_flips_ci),
            "orderings": figures.orderings, "verdict": verdict, "why": why,
            "note": _row_note(row, originals, by_role, reads_definition=reads_definition, samples=samples),
            "worst": [{
                "pair_id": int(after.item), "query_key": after.query_key, "doc_key": after.doc_key,
                "p_before": p_before, "p_after": p_after, "delta": p_after - p_before,
                "raw_before": answer_of[before.pair.pair_id].raw_output,
                "raw_after": answer_of[after.pair.pair_id].raw_output,
                "excerpt": change_excerpt(before.pair.passage, after.pair.passage),
            } for before, after, p_before, p_after in worst],
        })
    return {
        "kind": "perturbation", "judge": judge, "items": len(originals), "sample": sample, "seed": seed,
        "threshold": threshold, "tests": [test for test in dict.fromkeys(r.test for r in ROWS) if test in tests],
        "thresholds": {level: dict(limits) for level, limits in THRESHOLDS.items()}, "verdict": overall_verdict([row["verdict"] for row in rows]), "rows": rows,
    }


def _pair(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval is not None else None
