"""Judging pairs with a judge, for the scoring jobs: plain judges (Tok, Ask, embedding) in one call of their
scorer; prompt-strategy ensembles (DisastIR) strategy by strategy, each strategy's output stored as soon as it
has run so that a re-run calls no LLM twice; judges ensembles from their members' judgments, scoring the
members' missing ones first. Every path returns verdicts and the model usage it cost."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, is_dataclass

from django.db import transaction
from django.utils import timezone

from labeling.llm_adapter import (
    ensemble_members,
    judge_config,
    judge_relevance_rule,
    judgment_fields,
    pair_inputs,
    scorer_for,
)
from labeling.models import Judge, Judgment, MemberOutput, Pair, RelevanceDefinition
from labeling.services.retrieval_embeddings import stored_passage_vectors
from models_llm.ensembles import (
    DEFAULT_INTENT,
    LEGACY,
    EnsembleConfigError,
    StepOutput,
    StrategyOutcome,
    ensemble_combine,
    intent_get,
    strategies_for,
    strategy_run,
)
from models_llm.retrieval.dense import passage_text
from models_llm.types import JudgeConfig, PairInput, Verdict


@dataclass
class Usage:
    """Model calls made and their tokens (what a job pays for; cached outputs cost nothing)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


def query_intent(pair: Pair) -> str:
    """The search intent of the pair's query (metadata `intent`, default QA)."""
    intent = (pair.query.metadata or {}).get("intent") or DEFAULT_INTENT
    return str(intent)


def judge_pairs(
    *, judge: Judge, pairs: Sequence[Pair], definitions: dict[int, RelevanceDefinition | None]
) -> tuple[list[Verdict], Usage]:
    """One verdict per pair (in order) from `judge`, each pair judged under its query's definition in
    `definitions` (query id -> current version, None for none). `pairs` have query and passage loaded.
    Scoring errors propagate (the task retries them); a pair's unusable answer is its parse_error verdict."""
    if judge.is_ensemble:
        return _judges_ensemble(judge, pairs, definitions)
    texts = {query_id: (d.text if d is not None else None) for query_id, d in definitions.items()}
    inputs = pair_inputs(pairs, texts)
    config = judge_config(judge)
    if config.method == Judge.Method.ENSEMBLE:
        return _strategy_ensemble(judge, config, pairs, inputs, definitions)
    scorer = scorer_for(judge)
    if config.backend == Judge.Backend.EMBEDDING:
        verdicts = scorer.score(inputs, known=_stored_passages(judge, config, scorer.model_name, pairs))
    else:
        verdicts = scorer.score(inputs)
    usage = Usage()
    for verdict in verdicts:
        if verdict.status != Judgment.Status.FAILED or verdict.prompt_tokens:
            usage.add(Usage(1, verdict.prompt_tokens or 0, verdict.completion_tokens or 0))
    return verdicts, usage


def _stored_passages(judge: Judge, config: JudgeConfig, model: str, pairs: Sequence[Pair]) -> dict:
    """The passage embeddings the dense retriever stored for these pairs with the embedding judge's model, by
    embedded text. The retriever embeds in float32: a judge in another dtype embeds its own, as it always has."""
    if config.dtype != "float32":
        return {}
    return stored_passage_vectors(project_id=judge.project_id, model=model,
                                  passages=[(pair.passage_id, passage_text(pair.passage.title, pair.passage.text))
                                            for pair in pairs])


# -- prompt-strategy ensembles ----------------------------------------------------------------------------

def _plain(value):
    return asdict(value) if is_dataclass(value) else value


def _outcome_from_row(row: MemberOutput) -> StrategyOutcome:
    steps = tuple(StepOutput(**step) for step in row.steps)
    return StrategyOutcome(strategy=row.member, steps=steps, max_score=row.max_score, score=row.score,
                           parse_error=row.error)


def _row_from_outcome(judge: Judge, pair: Pair, definition, intent: str, outcome: StrategyOutcome) -> MemberOutput:
    steps = [{"step": s.step, "raw": s.raw, "value": _plain(s.value), "prompt_tokens": s.prompt_tokens,
              "completion_tokens": s.completion_tokens} for s in outcome.steps]
    return MemberOutput(
        pair=pair, judge=judge, definition=definition, member=outcome.strategy, intent=intent, score=outcome.score,
        max_score=outcome.max_score, error=outcome.parse_error, steps=steps, calls=len(steps),
        prompt_tokens=sum(s.prompt_tokens or 0 for s in outcome.steps),
        completion_tokens=sum(s.completion_tokens or 0 for s in outcome.steps),
    )


def _strategy_ensemble(
    judge: Judge, config: JudgeConfig, pairs: Sequence[Pair], inputs: Sequence[PairInput],
    definitions: dict[int, RelevanceDefinition | None],
) -> tuple[list[Verdict], Usage]:
    query_of = {pair.id: pair.query_id for pair in pairs}
    stored: dict[tuple[int, str], MemberOutput] = {}
    for row in MemberOutput.objects.filter(judge=judge, pair_id__in=list(query_of)):
        definition = definitions.get(query_of[row.pair_id])
        if row.definition_id == (definition.id if definition is not None else None):
            stored[(row.pair_id, row.member)] = row
    scorer = None
    usage, verdicts = Usage(), []
    for pair, pair_input in zip(pairs, inputs, strict=True):
        intent_name = query_intent(pair)
        try:
            intent = intent_get(intent_name)
            names = strategies_for(intent.name, config.strategies)
        except EnsembleConfigError as exc:
            verdicts.append(Verdict(pair_id=pair.id, status="failed", method=Judge.Method.ENSEMBLE,
                                    error=f"query {pair.query.external_id!r}: {exc}"))
            continue
        definition = definitions.get(pair.query_id)
        rows = []
        for name in names:
            row = stored.get((pair.id, name))
            if row is None:
                scorer = scorer or scorer_for(judge)
                outcome = strategy_run(intent, name, pair_input, scorer.generate_chat,
                                       prompts=config.prompts or LEGACY)
                row = _row_from_outcome(judge, pair, definition, intent.name, outcome)
                # Stored at once and on its own: a worker killed after this strategy does not run it again.
                with transaction.atomic():
                    MemberOutput.objects.bulk_create([row], ignore_conflicts=True)
                usage.add(Usage(row.calls, row.prompt_tokens, row.completion_tokens))
            rows.append(row)
        result = ensemble_combine(pair.id, intent.name, [_outcome_from_row(row) for row in rows])
        summary = {row.member: row.score for row in rows}
        verdicts.append(Verdict(
            pair_id=pair.id, status=result.status, method=Judge.Method.ENSEMBLE, p=result.p, guess=result.relevant,
            raw_output=json.dumps({"intent": intent.name, "scores": summary}), error=result.parse_error,
            prompt_tokens=sum(row.prompt_tokens for row in rows),
            completion_tokens=sum(row.completion_tokens for row in rows),
            score=result.mean, spread=result.spread,
        ))
    return verdicts, usage


# -- judges ensembles ---------------------------------------------------------------------------------------

def _judges_ensemble(
    judge: Judge, pairs: Sequence[Pair], definitions: dict[int, RelevanceDefinition | None]
) -> tuple[list[Verdict], Usage]:
    members = ensemble_members(judge)
    usage = Usage()
    by_member: dict[str, dict[int, Judgment]] = {}
    for member in members:
        have = _usable(member, pairs, definitions)
        # Imported judgments are what they are: nothing to score.
        missing = [pair for pair in pairs if pair.id not in have] if not member.is_imported else []
        if missing:
            verdicts, spent = judge_pairs(judge=member, pairs=missing, definitions=definitions)
            judgments_upsert(judge=member, pairs=missing, definitions=definitions, verdicts=verdicts)
            usage.add(spent)
            have = _usable(member, pairs, definitions)  # with what was just stored
        by_member[member.name] = have
    verdicts, rule = [], judge_relevance_rule(judge)
    for pair in pairs:
        ps = {name: found[pair.id].p_relevant for name, found in by_member.items()
              if pair.id in found and found[pair.id].status == Judgment.Status.OK}
        raw = json.dumps({"members": {name: (round(p, 6)) for name, p in ps.items()}})
        if not ps:
            states = ", ".join(f"{name}: {found[pair.id].status if pair.id in found else 'no judgment'}"
                               for name, found in by_member.items())
            verdicts.append(Verdict(pair_id=pair.id, status="parse_error", method=Judge.Method.ENSEMBLE, raw_output=raw,
                                    error=f"no member judge gave a P ({states})"))
            continue
        values = list(ps.values())
        p = sum(values) / len(values)
        verdicts.append(Verdict(pair_id=pair.id, status="ok", method=Judge.Method.ENSEMBLE, p=p, guess=rule.relevant(p),
                                raw_output=raw, spread=max(values) - min(values)))
    return verdicts, usage


def _usable(member: Judge, pairs: Sequence[Pair], definitions: dict) -> dict[int, Judgment]:
    """The member's judgment of each pair that the ensemble uses: the one under the query's current
    definition; for an imported judge, its newest one whatever the definition. A failed one is not usable."""
    query_of = {pair.id: pair.query_id for pair in pairs}
    found: dict[int, Judgment] = {}
    rows = Judgment.objects.filter(judge=member, pair_id__in=list(query_of)).exclude(status=Judgment.Status.FAILED)
    for judgment in rows.order_by("created_at", "id"):
        definition = definitions.get(query_of[judgment.pair_id])
        current = definition.id if definition is not None else None
        if member.is_imported or judgment.definition_id == current:
            found[judgment.pair_id] = judgment
    return found


@transaction.atomic
def judgments_upsert(
    *, judge: Judge, pairs: Sequence[Pair], definitions: dict[int, RelevanceDefinition | None],
    verdicts: Sequence[Verdict],
) -> None:
    """Store verdicts as the judge's judgments under each pair's definition: one per (pair, judge,
    definition), an earlier one replaced, except that a failure never replaces a stored answer."""
    now = timezone.now()
    definition_of = {pair.id: definitions.get(pair.query_id) for pair in pairs}
    existing = {
        (j.pair_id, j.definition_id): j
        for j in Judgment.objects.filter(judge=judge, pair_id__in=list(definition_of))
    }
    create, update = [], []
    for verdict in verdicts:
        definition = definition_of[verdict.pair_id]
        fields = judgment_fields(verdict)
        stored = existing.get((verdict.pair_id, definition.id if definition is not None else None))
        if stored is None:
            create.append(Judgment(pair_id=verdict.pair_id, judge=judge, definition=definition, created_at=now,
                                   **fields))
        elif verdict.status == Judgment.Status.OK or stored.status != Judgment.Status.OK:
            for name, value in fields.items():
                setattr(stored, name, value)
            stored.created_at = now
            update.append(stored)
    Judgment.objects.bulk_create(create)
    if update:
        Judgment.objects.bulk_update(update, [*judgment_fields(verdicts[0]), "created_at"])
