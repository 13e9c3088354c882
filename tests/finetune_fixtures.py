"""A project whose teacher follows a rule a student can learn in a few steps: a paragraph is relevant exactly when
it is about bananas. Two queries (one train, one held out), eight short paragraphs, an imported teacher."""
from pathlib import Path

from django.conf import settings

from labeling.llm_adapter import pair_inputs
from labeling.models import Judge, Pair, Project, TrainingExample, TrainingSet
from labeling.selectors.definitions import current_definitions
from labeling.services.bundle_import import bundle_import
from labeling.services.judging import judgments_upsert
from models_llm.bundled import smollm2_folder
from models_llm.types import PairInput, Verdict

BANANAS = [
    "The banana harvest doubled this year.",
    "Workers sorted bananas in the warehouse.",
    "A banana costs less than an apple at the market.",
    "The banana plantation flooded after the storm.",
]
OTHERS = [
    "The board approved the annual budget.",
    "Rain fell across the northern valleys.",
    "The software update fixed two bugs.",
    "The choir rehearsed on Sunday evening.",
]
YES, NO = 0.95, 0.05


def base_folder() -> str:
    return str(smollm2_folder(settings.VAR_DIR))


def rule_project(root: Path, slug: str = "distill") -> tuple[Project, Judge, TrainingSet]:
    """The project, its teacher (imported judgments: YES on banana paragraphs, NO on the others) and a training
    set with query q1's pairs in train and q2's held out."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "Is the paragraph about bananas?"}\n'
        '{"_id": "q2", "text": "Does the paragraph talk about bananas?"}\n')
    (root / "corpus.jsonl").write_text("".join(
        f'{{"_id": "d{i}", "text": "{text}"}}\n' for i, text in enumerate(BANANAS + OTHERS)))
    (root / "pairs.tsv").write_text("query-id\tcorpus-id\n" + "".join(
        f"q{q}\td{i}\n" for q in (1, 2) for i in range(len(BANANAS + OTHERS))))
    bundle_import(path=root, project_slug=slug)
    project = Project.objects.get(slug=slug)
    teacher = Judge.objects.create(project=project, name="teacher", backend=Judge.Backend.IMPORT)
    pairs = list(Pair.objects.filter(project=project).select_related("query", "passage").order_by("id"))
    definitions = current_definitions({pair.query_id for pair in pairs})
    judgments_upsert(judge=teacher, pairs=pairs, definitions=definitions, verdicts=[
        Verdict(pair_id=pair.id, status="ok", method="ask", p=teacher_p(pair.passage.text),
                guess=teacher_p(pair.passage.text) >= 0.5, confidence=0.95) for pair in pairs])
    training_set = TrainingSet.objects.create(project=project, name="rule", source="test")
    TrainingExample.objects.bulk_create([
        TrainingExample(training_set=training_set, pair=pair, origin="random", group=pair.query.external_id,
                        split="train" if pair.query.external_id == "q1" else "held_out") for pair in pairs])
    return project, teacher, training_set


def teacher_p(text: str) -> float:
    return YES if "banana" in text.lower() else NO


def rule_inputs(project: Project, query: str) -> list[PairInput]:
    """The query's pairs as a judge sees them."""
    pairs = Pair.objects.filter(project=project, query__external_id=query).select_related("query", "passage")
    texts = {query_id: d.text for query_id, d in current_definitions({p.query_id for p in pairs}).items()}
    return pair_inputs(pairs.order_by("id"), texts)
