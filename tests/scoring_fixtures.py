"""A small real project for scoring tests (ClimRetrieve texts: 3 queries x 20 passages) and the bundled
SmolLM2 / MiniLM judges."""
import json
from pathlib import Path

from django.conf import settings

from labeling.models import Judge, Project, RunEntry
from labeling.services.bundle_import import bundle_import
from labeling.services.judges import judge_create
from models_llm.bundled import minilm_folder, smollm2_folder

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "climretrieve"


def small_scoring_project(root: Path, *, slug: str = "score", queries: int = 3, passages: int = 20,
                          full: bool = False) -> Project:
    """`full`: the sample's whole passage and definition texts (else cut short to keep CPU tests quick)."""
    qs = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text().splitlines()[:queries]]
    corpus = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()[:passages]]
    for record in corpus:
        record["text"] = record["text"] if full else record["text"][:400]
    for record in qs:
        record.pop("metadata", None)
        record["definition"] = record.get("definition", "") if full else record.get("definition", "")[:300]
    root.mkdir(parents=True, exist_ok=True)
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qs))
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    pairs = ["query-id\tcorpus-id"] + [f"{q['_id']}\t{d['_id']}" for q in qs for d in corpus]
    (root / "pairs.tsv").write_text("\n".join(pairs) + "\n")
    bundle_import(path=root, project_slug=slug)
    return Project.objects.get(slug=slug)


def smollm2_judge(project: Project, name: str = "smollm2-tok", **parameters) -> Judge:
    return judge_create(project=project, name=name, backend="hf", model=str(smollm2_folder(settings.VAR_DIR)),
                        method=parameters.pop("method", "tok"), **parameters)


def minilm_judge(project: Project, name: str = "minilm") -> Judge:
    return judge_create(project=project, name=name, backend="embedding", model=str(minilm_folder()),
                        method="embedding")


def sample_ndcg10(project: Project, run_name: str) -> float:
    """The mean nDCG@10 of the project's run `run_name` over every query of the ClimRetrieve sample's qrels
    (data/climretrieve/qrels/test.tsv; a query the run missed counts 0), as pytrec_eval (trec_eval) computes it
    from the stored ranks: the independent reference the Systems page's leaderboard is checked against."""
    import pytrec_eval

    qrels: dict[str, dict[str, int]] = {}
    for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, grade = line.split("\t")
        qrels.setdefault(query, {})[doc] = int(grade)
    ranking: dict[str, dict[str, float]] = {}
    for query, doc, rank in RunEntry.objects.filter(run__project=project, run__name=run_name).values_list(
            "query__external_id", "passage__external_id", "rank"):
        ranking.setdefault(query, {})[doc] = -float(rank)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(ranking)
    return sum(per_query[q]["ndcg_cut_10"] if q in per_query else 0.0 for q in qrels) / len(qrels)
