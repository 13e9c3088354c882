"""A small LVHQ project (DisastIR 4.3): three human-written queries and their three LLM-generated twins, each with
one relevant passage (a reference grade), four runs that rank it where RANKS says, and one query in no set. The
tests compute nDCG@10 = 1 / log2(1 + rank) of the one relevant passage by hand."""
from __future__ import annotations

from labeling.models import Project, Run, RunEntry
from tests.factories import PairFactory, PassageFactory, ProjectFactory, QueryFactory

HUMAN_QUERIES = ("h1", "h2", "h3")
LLM_QUERIES = ("l1", "l2", "l3")
INTENTS = {"h1": "QA", "h2": "QA", "h3": "FC", "l1": "QA", "l2": "QA", "l3": "FC"}
RUNS = ("A", "B", "C", "D")
# run -> query -> the rank of the query's relevant passage (None: the run does not retrieve it).
RANKS = {
    "A": {"h1": 1, "h2": 1, "h3": 2, "l1": 1, "l2": 2, "l3": 2},
    "B": {"h1": 2, "h2": 3, "h3": 1, "l1": 1, "l2": 1, "l3": 1},
    "C": {"h1": 5, "h2": 4, "h3": 4, "l1": 3, "l2": 6, "l3": 4},
    "D": {"h1": None, "h2": 10, "h3": 8, "l1": None, "l2": None, "l3": 9},
}
FILLERS = [f"f{i}" for i in range(1, 11)]


def lvhq_project(*, slug: str = "lvhq", twins: bool = True, sets: tuple[str, str] = ("human", "llm")) -> Project:
    project = ProjectFactory(slug=slug)
    passages = {doc: PassageFactory(project=project, external_id=doc) for doc in FILLERS}
    queries = {}
    for name, members, others in ((sets[0], HUMAN_QUERIES, LLM_QUERIES), (sets[1], LLM_QUERIES, HUMAN_QUERIES)):
        for query, twin in zip(members, others):
            metadata = {"query_set": name, "intent": INTENTS[query]} | ({"twin": twin} if twins else {})
            queries[query] = QueryFactory(project=project, external_id=query, metadata=metadata)
    queries["x1"] = QueryFactory(project=project, external_id="x1", metadata={"intent": "QA"})
    for query, found in queries.items():
        passages[f"rel-{query}"] = PassageFactory(project=project, external_id=f"rel-{query}")
        PairFactory(project=project, query=found, passage=passages[f"rel-{query}"], reference_grade=2)
        PairFactory(project=project, query=found, passage=passages["f1"], reference_grade=0)
    for name in RUNS:
        run = Run.objects.create(project=project, name=name, kind=Run.Kind.IMPORTED)
        entries = []
        for query, rank in RANKS[name].items():
            if rank is None:
                continue
            docs = list(FILLERS)
            docs.insert(rank - 1, f"rel-{query}")
            entries += [RunEntry(run=run, query=queries[query], passage=passages[doc], rank=position,
                                 score=100.0 - position) for position, doc in enumerate(docs, 1)]
        RunEntry.objects.bulk_create(entries)
    return project
