"""draft_definitions: one outcome per query on the real SmolLM2 (a draft version or a recorded parse error, never
a new current definition), refused arguments, and a refine that has nothing to learn from."""
import io

import pytest
import torch
from django.core.management import CommandError, call_command

from labeling.models import DefinitionDraft, RelevanceDefinition
from labeling.selectors.definitions import current_definition
from tests.factories import JudgeFactory
from tests.scoring_fixtures import minilm_judge, small_scoring_project, smollm2_judge

pytestmark = pytest.mark.django_db


def run(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("draft_definitions", *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def one_thread():
    # Two CPU threads beside another busy process make generation ~30x slower than one (OpenMP spins).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_smollm2_drafts_every_query_once_and_nothing_becomes_current(tmp_path, one_thread):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=2)
    judge = smollm2_judge(project)
    queries = list(project.queries.order_by("id"))
    before = {query.id: current_definition(query=query) for query in queries}
    assert all(before.values())  # the bundle brings a definition per query

    lines = run("--project", project.slug, "--judge", judge.name)

    assert [line.split(":")[0] for line in lines] == [query.external_id for query in queries]
    for query, line in zip(queries, lines):
        (draft,) = DefinitionDraft.objects.filter(query=query)
        assert draft.finished_at is not None and draft.judge == judge and draft.raw_output
        if draft.definition is not None:  # SmolLM2-135M answered in the two-part shape
            assert draft.error == "" and line == f"{query.external_id}: draft version {draft.definition.version}"
            assert (draft.definition.is_draft, draft.definition.origin, draft.definition.drafted_by) == (
                True, "llm_draft", judge)
            assert "Examples of the information it seeks:\n1. " in draft.definition.text
        else:  # ...or it did not, and the answer is kept with the reason
            assert draft.error.startswith("the model's answer is not a definition")
            assert line == f"{query.external_id}: error: {draft.error}"
            assert query.definitions.count() == 1
        assert 0 < draft.completion_tokens <= 400 and draft.prompt_tokens > 0
        assert current_definition(query=query) == before[query.id]
    assert RelevanceDefinition.objects.filter(query__project=project, is_draft=False).count() == len(queries)


def test_unknown_project_judge_or_query_and_judges_that_cannot_write_are_refused(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=1)
    JudgeFactory(project=project, name="from-file")
    minilm = minilm_judge(project)
    with pytest.raises(CommandError, match="no project 'nope'"):
        run("--project", "nope", "--judge", "x")
    with pytest.raises(CommandError, match=r"has no judge 'x' \(its judges: from-file, minilm\)"):
        run("--project", project.slug, "--judge", "x")
    with pytest.raises(CommandError, match="its backend is 'import'"):
        run("--project", project.slug, "--judge", "from-file")
    with pytest.raises(CommandError, match="its backend is 'embedding'"):
        run("--project", project.slug, "--judge", minilm.name)
    smollm2 = smollm2_judge(project)
    with pytest.raises(CommandError, match="has no query 'missing'"):
        run("--project", project.slug, "--judge", smollm2.name, "--query", "missing")
    assert not DefinitionDraft.objects.exists()


def test_refine_without_relevant_labels_prints_the_reason_per_query(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=1)
    judge = smollm2_judge(project)
    first = project.queries.order_by("id").first()
    lines = run("--project", project.slug, "--judge", judge.name, "--refine", "--query", first.external_id)
    assert lines == [f"{first.external_id}: error: no passage of query {first.external_id!r} is labelled relevant "
                     "by the experts yet: there is nothing to refine the definition from"]
    assert not DefinitionDraft.objects.exists()
