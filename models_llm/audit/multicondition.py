"""MultiConIR's four tests of a relevance scorer on multi-condition items (Lu et al., 2025), from any scores of
(query, document) pairs: a judge's P or a run's ranks.

An item has queries Q^style_k stating the first k of its K conditions (k = 1..K, style instruction or descriptive)
and documents d_s meeting its first s conditions and not the others (s = 0..K; d_K is the positive). With s(Q, d)
the score and a win a strict `>` (a tie is not a win). The paper's formulas (section 3, K = 10) beside the code's:

- Task 1, complexity robustness, per style. Paper: WR_k = 1/N sum_i 1(S(q_k, d+) > S(q_k, d_(k-1))). Code:
  WR1(k) = mean over items of 1[s(Q_k, d_K) > s(Q_k, d_(k-1))]. Its "Decline" (Table 1: "the degree of Win Rate
  reduction from query1 to query10") is WR1(1) - WR1(K) of the average over domains.
- Task 2, relevance monotonicity. Paper: WR_(k,k-1) = 1/N sum_i 1(S(q_10, d_k) > S(q_10, d_(k-1))). Code: WR2(k)
  = mean over items of 1[s(Q_K, d_k) > s(Q_K, d_(k-1))] under the full instruction query (the descriptive one where
  an item has no instruction style).
- Task 3, format invariance. Paper: FR = 1/N sum_i 1( 1(S_inst(q_10, d_k) > S_inst(q_10, d_(k-1))) !=
  1(S_desc(q_10, d_k) > S_desc(q_10, d_(k-1))) ). Code: FR(k) = mean over items with both full queries of
  1[win2_instruction(k) != win2_descriptive(k)], Task 2's comparisons under each style's full query; `mean` is FR.
- Task 4, document length (the paper's Tables 19 and 20: Task 2 with documents padded to 512 and 1024 words).
  Paper: "repeated filler text, e.g. 'The grass is green. The sky is blue. The sun is yellow. Here we go. There and
  back again.' ... inserted between the original document sentences until the total text length reaches 512 or
  1024 words". Code: Task 2's Win Rate with every document padded so (FillerPadder, PAPER_FILLER by default), and
  the drop of its mean from unpadded to the longest pad.

Each curve is per domain (the mean over the domain's items), `average` is the mean over domains and `mean` the mean
of `average` over k. A comparison with a missing score (an unanswered prompt) is left out and counted in `skipped`.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

STYLES = ("instruction", "descriptive")

# Verdicts: a win rate is robust from `robust` up and sensitive below `sensitive`; a flip rate or a drop of win rate
# under padding is robust up to `robust` and sensitive above `sensitive`; between them, watch.
MULTICONDITION_THRESHOLDS = {"win_rate": {"robust": 0.9, "sensitive": 0.7},
                             "flip_rate": {"robust": 0.05, "sensitive": 0.15},
                             "length_drop": {"robust": 0.05, "sensitive": 0.15}}

TITLES = {
    "task1": "Complexity robustness: Win Rate of the positive over the (k-1)-condition document under the "
             "k-condition query",
    "task2": "Relevance monotonicity: Win Rate of d_k over d_(k-1) under the full query",
    "task3": "Format invariance: Flip Rate of Task 2's wins between the instruction and descriptive full queries",
}
# MultiConIR's filler (appendix D.3, after Wang et al. 2023): repeated between a document's sentences.
PAPER_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

# (query external id, document external id, words the document is padded to; 0: not padded)
ScoreKey = tuple[str, str, int]


@dataclass(frozen=True)
class McQuery:
    key: str
    text: str
    style: str
    k: int


@dataclass(frozen=True)
class McDocument:
    key: str
    text: str
    satisfies: int


@dataclass(frozen=True)
class McItem:
    """One multi-condition item: its queries by (style, k), its documents by the number of conditions they meet,
    `max_k` = K (its largest k) and the condition texts where the bundle gave them."""

    item: str
    domain: str
    max_k: int
    queries: Mapping[tuple[str, int], McQuery] = field(default_factory=dict)
    documents: Mapping[int, McDocument] = field(default_factory=dict)
    conditions: tuple[str, ...] = ()

    @property
    def styles(self) -> tuple[str, ...]:
        return tuple(style for style in STYLES if any(s == style for s, _ in self.queries))

    @property
    def main_style(self) -> str:
        """The style of Tasks 2 and 4: instruction where the item has its full query in it."""
        return "instruction" if ("instruction", self.max_k) in self.queries else "descriptive"


@dataclass(frozen=True)
class McRecord:
    """A query or passage as stored: external id, text and metadata object."""

    key: str
    text: str
    metadata: Mapping


def _section(record: McRecord, what: str) -> Mapping | None:
    section = record.metadata.get("multicondition") if isinstance(record.metadata, Mapping) else None
    if section is not None and not isinstance(section, Mapping):
        raise ValueError(f"{what} {record.key!r}: metadata.multicondition must be an object")
    return section


def _text(section: Mapping, name: str, where: str) -> str:
    value = section.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: metadata.multicondition.{name} must be a non-empty string, got {value!r}")
    return value


def _count(section: Mapping, name: str, where: str, low: int) -> int:
    value = section.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{where}: metadata.multicondition.{name} must be an integer >= {low}, got {value!r}")
    return value


def _conditions(section: Mapping, k: int, where: str) -> tuple[str, ...]:
    value = section.get("conditions")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value) or len(value) < k:
        raise ValueError(f"{where}: metadata.multicondition.conditions must list at least its k = {k} condition "
                         f"texts (non-empty strings)")
    return tuple(value)


def multicondition_items(queries: Iterable[McRecord], documents: Iterable[McRecord]) -> list[McItem]:
    """The items the records describe (records without `metadata.multicondition` are not part of any), in the order
    their first query comes. ValueError naming the query or passage at the first problem: a wrong type, two queries
    for one (item, style, k) or two documents for one (item, satisfies), two domains or condition lists for one
    item, a document of an item without queries or meeting more conditions than the item's largest k, an item
    without its positive (satisfies = K) or listing more conditions than its largest k."""
    found: dict[str, dict] = {}
    for record in queries:
        section = _section(record, "query")
        if section is None:
            continue
        where = f"query {record.key!r}"
        item, domain = _text(section, "item", where), _text(section, "domain", where)
        k, style = _count(section, "k", where, 1), section.get("style")
        if style not in STYLES:
            raise ValueError(f"{where}: metadata.multicondition.style must be one of {list(STYLES)}, got {style!r}")
        conditions = _conditions(section, k, where)
        entry = found.setdefault(item, {"domain": domain, "queries": {}, "documents": {}, "conditions": ()})
        if entry["domain"] != domain:
            raise ValueError(f"{where}: item {item!r} is in domain {entry['domain']!r}, not {domain!r}")
        if (style, k) in entry["queries"]:
            raise ValueError(f"{where}: item {item!r} already has the {style} query with k = {k} "
                             f"({entry['queries'][style, k].key!r})")
        known = entry["conditions"]
        if conditions[:len(known)] != known[:len(conditions)]:
            raise ValueError(f"{where}: its conditions differ from those another query of item {item!r} lists")
        if len(conditions) > len(known):
            entry["conditions"] = conditions
        entry["queries"][style, k] = McQuery(key=record.key, text=record.text, style=style, k=k)
    for record in documents:
        section = _section(record, "passage")
        if section is None:
            continue
        where = f"passage {record.key!r}"
        item, satisfies = _text(section, "item", where), _count(section, "satisfies", where, 0)
        if item not in found:
            raise ValueError(f"{where}: no query describes item {item!r}")
        entry = found[item]
        largest = max(k for _, k in entry["queries"])
        if satisfies > largest:
            raise ValueError(f"{where}: satisfies = {satisfies}, but item {item!r} has at most k = {largest}")
        if satisfies in entry["documents"]:
            raise ValueError(f"{where}: item {item!r} already has a document with satisfies = {satisfies} "
                             f"({entry['documents'][satisfies].key!r})")
        entry["documents"][satisfies] = McDocument(key=record.key, text=record.text, satisfies=satisfies)
    items = []
    for item, entry in found.items():
        largest = max(k for _, k in entry["queries"])
        if largest not in entry["documents"]:
            raise ValueError(f"item {item!r} has no positive: a passage with satisfies = {largest} (its largest k)")
        if len(entry["conditions"]) > largest:
            raise ValueError(f"item {item!r} lists {len(entry['conditions'])} conditions, but no query states more "
                             f"than {largest}")
        items.append(McItem(item=item, domain=entry["domain"], max_k=largest, queries=entry["queries"],
                            documents=entry["documents"], conditions=entry["conditions"]))
    return items


@dataclass(frozen=True)
class _Comparison:
    item: McItem
    k: int
    better: ScoreKey
    worse: ScoreKey


def _task1(item: McItem, style: str, pad: int = 0) -> list[_Comparison]:
    positive = item.documents[item.max_k].key
    return [_Comparison(item, k, (query.key, positive, pad), (query.key, item.documents[k - 1].key, pad))
            for k in range(1, item.max_k + 1)
            if (query := item.queries.get((style, k))) is not None and k - 1 in item.documents]


def _task2(item: McItem, style: str | None = None, pad: int = 0) -> list[_Comparison]:
    """d_k against d_(k-1) under the item's full query of `style` (None: its main style); none without it."""
    query = item.queries.get((style or item.main_style, item.max_k))
    if query is None:
        return []
    return [_Comparison(item, k, (query.key, item.documents[k].key, pad), (query.key, item.documents[k - 1].key, pad))
            for k in range(1, item.max_k + 1) if k in item.documents and k - 1 in item.documents]


def multicondition_needs(items: Sequence[McItem], pads: Sequence[int]) -> list[ScoreKey]:
    """Every (query, document, pad) the four tests compare, each once, item by item: Task 1 under every query of
    both styles, Task 2 under both full queries (Task 3 compares them), Task 4 under the main full query padded."""
    needs: dict[ScoreKey, None] = {}
    for item in items:
        comparisons = [c for style in item.styles for c in _task1(item, style)]
        comparisons += [c for style in item.styles for c in _task2(item, style)]
        comparisons += [c for pad in pads for c in _task2(item, pad=pad)]
        for comparison in comparisons:
            needs[comparison.better] = needs[comparison.worse] = None
    return list(needs)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """`text` cut after each `.`, `!` or `?` followed by white space (the sentences keep their own punctuation)."""
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


class FillerPadder:
    """Documents padded to a number of words as MultiConIR pads them: the filler's sentences, repeated in order, are
    inserted between the document's sentences (in turn into each gap: after sentence 1, after sentence 2, ...;
    after its only sentence for a one-sentence document) until the text has exactly `words` words, the last filler
    sentence cut short where needed. The same for every document, so that d_k and d_(k-1) differ only in their
    condition sentences and the filler around them."""

    def __init__(self, filler: str = PAPER_FILLER) -> None:
        self.filler = sentences(filler)
        if not self.filler:
            raise ValueError("the filler must hold at least one word")

    def pad(self, text: str, words: int) -> str:
        """`text` padded to `words` words (unchanged when it is that long already or `words` is 0)."""
        own = sentences(text)
        need = words - sum(len(sentence.split()) for sentence in own)
        if words <= 0 or need <= 0 or not own:
            return text
        gaps: list[list[str]] = [[] for _ in range(max(1, len(own) - 1))]
        turn = 0
        while need > 0:
            cut = self.filler[turn % len(self.filler)].split()[:need]
            gaps[turn % len(gaps)].append(" ".join(cut))
            need -= len(cut)
            turn += 1
        if len(own) == 1:
            return " ".join([own[0], *gaps[0]])
        out = []
        for index, sentence in enumerate(own):
            out.append(sentence)
            if index < len(gaps):
                out += gaps[index]
        return " ".join(out)


def _verdict(value: float | None, kind: str) -> str:
    if value is None:
        return "no data"
    value = round(value, 9)  # a mean of a few 0/1 outcomes lands on a threshold; float error must not decide
    limits = MULTICONDITION_THRESHOLDS[kind]
    if kind == "win_rate":
        return "robust" if value >= limits["robust"] else "sensitive" if value < limits["sensitive"] else "watch"
    return "robust" if value <= limits["robust"] else "sensitive" if value > limits["sensitive"] else "watch"


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _curve(outcomes: Mapping[str, Mapping[int, list[bool]]], domains: Sequence[str], max_k: int) -> dict:
    by_domain = {domain: [_mean(outcomes.get(domain, {}).get(k, [])) for k in range(1, max_k + 1)]
                 for domain in domains}
    average = [_mean(by_domain[d][k - 1] for d in domains) for k in range(1, max_k + 1)]
    return {"k": list(range(1, max_k + 1)), "by_domain": by_domain, "average": average, "mean": _mean(average)}


class _Tally:
    """Outcomes per domain and k of comparisons whose scores are all present; the others are counted as skipped."""

    def __init__(self, scores: Mapping[ScoreKey, float | None]) -> None:
        self.scores = scores
        self.skipped = 0

    def win(self, comparison: _Comparison) -> bool | None:
        better, worse = self.scores.get(comparison.better), self.scores.get(comparison.worse)
        if better is None or worse is None:
            return None
        return better > worse

    def wins(self, comparisons: Iterable[_Comparison]) -> dict[str, dict[int, list[bool]]]:
        outcomes: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
        for comparison in comparisons:
            won = self.win(comparison)
            if won is None:
                self.skipped += 1
            else:
                outcomes[comparison.item.domain][comparison.k].append(won)
        return outcomes

    def flips(self, items: Iterable[McItem]) -> dict[str, dict[int, list[bool]]]:
        """Task 3: per item with both full queries and k, whether Task 2's win under the instruction query differs
        from the win under the descriptive one."""
        outcomes: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
        for item in items:
            descriptive = {c.k: c for c in _task2(item, "descriptive")}
            for instruction in _task2(item, "instruction"):
                if instruction.k not in descriptive:
                    continue
                a, b = self.win(instruction), self.win(descriptive[instruction.k])
                if a is None or b is None:
                    self.skipped += 1
                else:
                    outcomes[item.domain][instruction.k].append(a != b)
        return outcomes


def _figure(value: float | None) -> str:
    return "no value" if value is None else f"{value:.2f}"


def _win_why(mean: float | None, what: str) -> str:
    if mean is None:
        return f"No {what} could be measured (no comparison had both scores)."
    limits = MULTICONDITION_THRESHOLDS["win_rate"]
    return (f"Mean Win Rate {mean:.2f} over k ({what}); robust from {limits['robust']}, sensitive below "
            f"{limits['sensitive']}.")


def multicondition_report(items: Sequence[McItem], scores: Mapping[ScoreKey, float | None], *, subject: str,
                          pads: Sequence[int], unavailable: str = "") -> dict:
    """The four tests' figures (the JSON of the audit report) from `scores` (a missing key or None: missing).
    `unavailable`: why Task 4 cannot be measured (a run's scores cannot be re-scored padded); `pads` is then
    ignored."""
    domains = sorted({item.domain for item in items})
    max_k = max((item.max_k for item in items), default=0)
    tally = _Tally(scores)
    styles = {style: _curve(tally.wins(c for item in items if style in item.styles for c in _task1(item, style)),
                            domains, max_k)
              for style in STYLES if any(style in item.styles for item in items)}
    for curve in styles.values():
        curve["decline"] = _decline(curve["average"])
    task1_mean = _mean(curve["mean"] for curve in styles.values())
    task2 = _curve(tally.wins(c for item in items for c in _task2(item)), domains, max_k)
    task3 = _curve(tally.flips(items), domains, max_k)
    flip = MULTICONDITION_THRESHOLDS["flip_rate"]
    task3_why = ("No item has both full queries with both scores." if task3["mean"] is None else
                 f"Flip Rate {task3['mean']:.2f} (the mean over k of Task 2's wins that change between the "
                 f"instruction and descriptive full queries); robust up to {flip['robust']}, sensitive above "
                 f"{flip['sensitive']}.")
    declines = {style: curve["decline"] for style, curve in styles.items() if curve["decline"] is not None}
    task1_why = _win_why(task1_mean, "both styles") + "".join(
        f" Decline ({style}, WR at k = 1 minus WR at k = {max_k}): {value:.2f}." for style, value in declines.items())
    report = {
        "kind": "multicondition", "subject": subject, "items": len(items), "domains": domains, "max_k": max_k,
        "skipped": 0, "thresholds": MULTICONDITION_THRESHOLDS,
        "task1": {"title": TITLES["task1"], "styles": styles, "mean": task1_mean,
                  "verdict": _verdict(task1_mean, "win_rate"), "why": task1_why},
        "task2": {"title": TITLES["task2"], **task2, "verdict": _verdict(task2["mean"], "win_rate"),
                  "why": _win_why(task2["mean"], "the full query")},
        "task3": {"title": TITLES["task3"], **task3, "verdict": _verdict(task3["mean"], "flip_rate"), "why": task3_why},
        "task4": _task4(items, tally, domains, max_k, pads, unavailable, task2),
        "examples": _examples(items),
    }
    report["skipped"] = tally.skipped
    return report


def _decline(average: Sequence[float | None]) -> float | None:
    """The paper's Decline: the Win Rate at k = 1 minus the Win Rate at the largest k (None without both)."""
    if not average or average[0] is None or average[-1] is None:
        return None
    return average[0] - average[-1]


def _examples(items: Sequence[McItem]) -> list[dict]:
    """The first item of each domain that lists its condition texts: what condition index k stands for."""
    examples: dict[str, dict] = {}
    for item in items:
        if item.conditions and item.domain not in examples:
            examples[item.domain] = {"item": item.item, "domain": item.domain, "conditions": list(item.conditions)}
    return [examples[domain] for domain in sorted(examples)]


def _task4(items: Sequence[McItem], tally: _Tally, domains: Sequence[str], max_k: int, pads: Sequence[int],
           unavailable: str, unpadded: dict) -> dict:
    """Task 2's curve (`unpadded`, pad 0) and again under each pad."""
    title = (f"Longer documents: Task 2 with documents padded to {' and '.join(map(str, sorted(pads)))} words"
             if pads and not unavailable else "Longer documents: Task 2 with padded documents")
    if not unavailable and not pads:
        unavailable = "no padding asked"
    if unavailable:
        return {"title": title, "unavailable": unavailable, "verdict": "no data",
                "why": f"Not measured: {unavailable}."}
    curves = {"0": {key: unpadded[key] for key in ("k", "by_domain", "average", "mean")}} | {
        str(pad): _curve(tally.wins(c for item in items for c in _task2(item, pad=pad)), domains, max_k)
        for pad in sorted(pads)}
    first, last = curves["0"]["mean"], curves[str(max(pads))]["mean"]
    drop = None if first is None or last is None else first - last
    limits = MULTICONDITION_THRESHOLDS["length_drop"]
    why = ("No Win Rate could be measured both unpadded and at the longest pad." if drop is None else
           f"Mean Win Rate {_figure(first)} unpadded and {_figure(last)} at {max(pads)} words: a drop of "
           f"{drop:.2f}; robust up to {limits['robust']}, sensitive above {limits['sensitive']}.")
    return {"title": title, "pads": curves, "verdict": _verdict(drop, "length_drop"), "why": why}
