"""The database, not just the services, refuses rows that break the data model."""
from typing import get_args

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from labeling.models import Judge, Judgment, RelevanceDefinition
from labeling.models.project import DEFINITION_IN_USE_SQL
from models_llm.types import Backend, Method
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    PairSourceFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
)

pytestmark = pytest.mark.django_db


def refused(create) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


def test_query_external_id_is_unique_per_project():
    query = QueryFactory(external_id="q1")
    refused(lambda: QueryFactory(project=query.project, external_id="q1"))
    QueryFactory(external_id="q1")  # another project may reuse it


def test_query_external_id_may_not_be_empty():
    refused(lambda: QueryFactory(external_id=""))


def test_passage_external_id_is_unique_per_project():
    passage = PassageFactory(external_id="d1")
    refused(lambda: PassageFactory(project=passage.project, external_id="d1"))
    PassageFactory(external_id="d1")


def test_pair_is_unique_per_query_and_passage():
    pair = PairFactory()
    refused(lambda: PairFactory(project=pair.project, query=pair.query, passage=pair.passage))


def test_pair_reference_grade_is_not_negative():
    refused(lambda: PairFactory(reference_grade=-1))


def test_pair_source_system_is_unique_per_pair():
    source = PairSourceFactory(system="bm25")
    refused(lambda: PairSourceFactory(pair=source.pair, system="bm25"))


def test_membership_is_unique_and_role_valid():
    membership = MembershipFactory()
    refused(lambda: MembershipFactory(project=membership.project, user=membership.user))
    refused(lambda: MembershipFactory(role="owner"))


def test_only_one_current_label_per_pair_and_annotator():
    label = LabelFactory()
    refused(lambda: LabelFactory(pair=label.pair, annotator=label.annotator))
    # History is fine: once the first is superseded, a new current label may be added.
    label.superseded_at = timezone.now()
    label.save()
    LabelFactory(pair=label.pair, annotator=label.annotator)
    LabelFactory(pair=label.pair, annotator=label.annotator, superseded_at=timezone.now())


def test_label_grade_and_time_are_not_negative():
    refused(lambda: LabelFactory(grade=-1))
    refused(lambda: LabelFactory(time_spent_seconds=-0.5))


@pytest.mark.parametrize("p", [-0.01, 1.01])
def test_judgment_p_relevant_is_a_probability(p):
    refused(lambda: JudgmentFactory(p_relevant=p))


def test_judgment_p_relevant_bounds_are_allowed():
    JudgmentFactory(p_relevant=0.0)
    JudgmentFactory(p_relevant=1.0)


def test_judgment_ok_needs_p_relevant_and_failure_forbids_it():
    refused(lambda: JudgmentFactory(status=Judgment.Status.OK, p_relevant=None))
    refused(lambda: JudgmentFactory(status=Judgment.Status.PARSE_ERROR, p_relevant=0.3))
    JudgmentFactory(status=Judgment.Status.PARSE_ERROR, p_relevant=None, error="no JSON")


def test_judgment_confidence_is_a_probability():
    refused(lambda: JudgmentFactory(confidence=1.5))


def test_judgment_unique_per_pair_judge_and_definition():
    definition = RelevanceDefinitionFactory()
    pair = PairFactory(project=definition.query.project, query=definition.query)
    judge = JudgeFactory(project=pair.project)
    JudgmentFactory(pair=pair, judge=judge, definition=definition)
    refused(lambda: JudgmentFactory(pair=pair, judge=judge, definition=definition))
    # A new definition version may be judged again.
    JudgmentFactory(pair=pair, judge=judge, definition=RelevanceDefinitionFactory(query=definition.query))


def test_judgment_unique_per_pair_and_judge_without_definition():
    judgment = JudgmentFactory(definition=None)
    refused(lambda: JudgmentFactory(pair=judgment.pair, judge=judgment.judge, definition=None))


def test_judge_name_is_unique_per_project():
    judge = JudgeFactory(name="gpt")
    refused(lambda: JudgeFactory(project=judge.project, name="gpt"))


def test_judge_backend_is_one_of_the_judge_kinds():
    refused(lambda: JudgeFactory(backend="vllm"))
    for backend in ("hf", "openai", "embedding", "crossencoder", "ensemble", "import"):
        JudgeFactory(backend=backend)


def test_the_judge_kinds_and_methods_agree_with_models_llms():
    # models_llm imports nothing from Django: its Literal types name the backends that load a model and the methods.
    assert set(get_args(Backend)) == set(Judge.Backend.values) - {"ensemble", "import"}
    assert set(get_args(Method)) == set(Judge.Method.values)


def test_definition_version_starts_at_one():
    refused(lambda: RelevanceDefinitionFactory(version=0))


def test_definition_version_is_unique_per_query():
    definition = RelevanceDefinitionFactory(version=1)
    refused(lambda: RelevanceDefinitionFactory(query=definition.query, version=1))


def test_project_slug_is_unique():
    ProjectFactory(slug="same")
    refused(lambda: ProjectFactory(slug="same"))


def test_the_sql_in_use_rule_picks_the_versions_in_use_picks():
    query = QueryFactory()
    RelevanceDefinitionFactory(query=query)
    RelevanceDefinitionFactory(query=query, is_draft=True, origin=RelevanceDefinition.Origin.LLM_DRAFT)
    RelevanceDefinitionFactory(query=query, origin=RelevanceDefinition.Origin.LLM_REFINED)
    RelevanceDefinitionFactory(query=query, is_draft=True, origin=RelevanceDefinition.Origin.LLM_REFINED)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT d.id FROM labeling_relevancedefinition d WHERE {DEFINITION_IN_USE_SQL} ORDER BY d.id")
        in_sql = [row[0] for row in cursor]
    in_use = list(RelevanceDefinition.objects.in_use().order_by("id").values_list("id", flat=True))
    assert in_sql == in_use and len(in_use) == 2
