"""The perturbation audit's part of the generic audit service (labeling/services/audit.py): its parameters, its
probes read from the project (a seeded sample of the gold pairs, and passages to borrow that are not about the item's query) and its
report. The variant texts and the figures are models_llm.audit's."""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

from django.conf import settings

from labeling.llm_adapter import judge_config
from labeling.models import Judge, Pair, PairSource, Passage, Project, Query
from labeling.selectors.definitions import current_definitions
from labeling.selectors.streams import GoldPair, gold_pairs
from labeling.services.audit_errors import AuditConflict, AuditError
from models_llm.audit.perturb import AuditItem, OtherPassage
from models_llm.audit.perturb import perturbation_probes as build_probes
from models_llm.audit.robustness import robustness_report, samples_text
from models_llm.audit.types import PERTURBATION_TESTS, Probe
from models_llm.types import Verdict

DEFAULT_SAMPLE = 200
MAX_SEED = 2**32 - 1
# Passages of the gold pairs the audit may borrow as padding text or stuffing bases: a seeded sample of this many
# keeps the read small on a large project and still gives every item plenty of text to borrow.
OTHER_POOL = 400
BORROWING_TESTS = frozenset({"length", "stuffing", "injection"})


def whole_parameter(raw: Mapping, name: str, default: int, low: int, high: int) -> int:
    value = raw.get(name, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AuditError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


def _tests(raw: Mapping) -> list[str]:
    value = raw.get("tests", list(PERTURBATION_TESTS))
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(test, str) for test in value):
        raise AuditError(f"tests must be a list of test names ({', '.join(PERTURBATION_TESTS)})")
    unknown = [test for test in value if test not in PERTURBATION_TESTS]
    if unknown:
        raise AuditError(f"unknown test(s) {', '.join(map(repr, unknown))}; the tests are "
                         f"{', '.join(PERTURBATION_TESTS)}")
    if not value:
        raise AuditError(f"choose at least one test ({', '.join(PERTURBATION_TESTS)})")
    return [test for test in PERTURBATION_TESTS if test in value]


def perturbation_parameters(raw: Mapping) -> dict:
    """{"sample": gold pairs to audit (default 200, at most AUDIT_MAX_SAMPLE), "seed": the draw's seed (default 0),
    "tests": the tests in report order (default all)}; AuditError on an unknown key or a bad value."""
    unknown = sorted(set(raw) - {"sample", "seed", "tests"})
    if unknown:
        raise AuditError(f"unknown parameter(s) {', '.join(map(repr, unknown))} of a perturbation audit "
                         "(sample, seed, tests)")
    return {"sample": whole_parameter(raw, "sample", DEFAULT_SAMPLE, 1, settings.AUDIT_MAX_SAMPLE),
            "seed": whole_parameter(raw, "seed", 0, 0, MAX_SEED), "tests": _tests(raw)}


def _golds(project: Project) -> list[GoldPair]:
    # gold_pairs streams in pair id order: the same order, hence the same draw, on SQLite and PostgreSQL.
    golds = [pair for pair in gold_pairs(project) if pair.gold is not None]
    if not golds:
        raise AuditConflict(f"project {project.slug!r} has no gold pairs (a reference grade, an adjudication or "
                         "agreeing annotators' labels): the audit compares the judge on them")
    return golds


def _items(project: Project, chosen: Sequence[GoldPair]) -> list[AuditItem]:
    pairs = Pair.objects.filter(project=project, id__in=[pair.pair_id for pair in chosen]).select_related(
        "query", "passage").in_bulk()
    definitions = current_definitions({pair.query_id for pair in chosen})
    relevant_from = project.label_scale.relevant_from
    items = []
    for gold in chosen:
        pair = pairs[gold.pair_id]
        definition = definitions.get(pair.query_id)
        items.append(AuditItem(
            item=str(pair.id), query_key=pair.query.external_id, doc_key=pair.passage.external_id,
            query=pair.query.text, passage=pair.passage.text, title=pair.passage.title,
            definition=definition.text if definition is not None else None, relevant=gold.gold >= relevant_from,
        ))
    return items


def _others(project: Project, golds: Sequence[GoldPair], seed: int) -> list[OtherPassage]:
    """A seeded sample of the gold pairs' passages, each with the queries it may be about: those it is graded
    relevant for, and those a retrieval system found it for (pool sources). An item borrows only passages not
    about its query. Being in the pool alone says nothing: an all-pairs pool pairs every passage with every
    query."""
    candidates = sorted({pair.passage_id for pair in golds})
    drawn = sorted(random.Random(f"{seed}:others").sample(candidates, min(OTHER_POOL, len(candidates))))
    wanted = set(drawn)
    relevant_from = project.label_scale.relevant_from
    about: dict[int, set[int]] = defaultdict(set)
    for pair in golds:
        if pair.passage_id in wanted and pair.gold >= relevant_from:
            about[pair.passage_id].add(pair.query_id)
    for passage_id, query_id in PairSource.objects.filter(
            pair__project=project, pair__passage_id__in=drawn).values_list("pair__passage_id", "pair__query_id"):
        about[passage_id].add(query_id)
    keys = dict(Query.objects.filter(project=project).values_list("id", "external_id"))
    passages = Passage.objects.filter(project=project, id__in=drawn).order_by("id")
    return [OtherPassage(key=p.external_id, text=p.text, title=p.title,
                         query_keys=frozenset(keys[query_id] for query_id in about[p.id])) for p in passages]


def perturbation_probes(*, project: Project, judge: Judge, parameters: Mapping) -> list[Probe]:
    """The audit's probes (models_llm.audit.perturb) on `sample` gold pairs drawn with random.Random(seed) from the
    project's gold pairs in id order, each with its query's current definition. AuditError when there is no gold
    pair."""
    golds = _golds(project)
    seed, tests = parameters["seed"], parameters["tests"]
    chosen = sorted(random.Random(seed).sample(golds, min(parameters["sample"], len(golds))),
                    key=lambda pair: pair.pair_id)
    others = _others(project, golds, seed) if BORROWING_TESTS & set(tests) else []
    return build_probes(_items(project, chosen), others, tests=tests, seed=seed)


def perturbation_report(*, project: Project, judge: Judge, parameters: Mapping, probes: Sequence[Probe],
                        verdicts: Sequence[Verdict]) -> dict:
    """The report of models_llm.audit.robustness, with what the judge's configuration says about two tests: whether
    it reads the definition at all, and whether it samples any text (Tok without CoT and embeddings do not)."""
    config = judge_config(judge)
    return robustness_report(judge=judge.name, probes=probes, answers=verdicts, tests=parameters["tests"],
                             sample=parameters["sample"], seed=parameters["seed"],
                             reads_definition=config.use_definition, samples=samples_text(config))
