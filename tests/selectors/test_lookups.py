"""Rows named by a page, an endpoint or a command: found in their project only, else NotFound saying what is
missing."""
import pytest

from labeling.exceptions import NotFound
from labeling.selectors.lookups import (
    JudgeNotFound,
    judge_by_name,
    pair_of_project,
    project_by_slug,
    query_by_external_id,
    query_of_project,
)
from tests.factories import JudgeFactory, PairFactory, ProjectFactory, QueryFactory

pytestmark = pytest.mark.django_db


def test_a_judge_is_found_by_name_in_its_project_only():
    project, other = ProjectFactory(slug="p"), ProjectFactory()
    JudgeFactory(project=project, name="b"), JudgeFactory(project=project, name="a")
    JudgeFactory(project=other, name="elsewhere")
    assert judge_by_name(project=project, name="a").name == "a"
    with pytest.raises(JudgeNotFound, match=r"^project 'p' has no judge 'elsewhere'$") as caught:
        judge_by_name(project=project, name="elsewhere")
    assert sorted(caught.value.known) == ["a", "b"]


def test_rows_of_another_project_are_not_found():
    project, other = ProjectFactory(slug="p"), ProjectFactory()
    query = QueryFactory(project=project, external_id="q1")
    foreign_query = QueryFactory(project=other, external_id="q2")
    pair, foreign_pair = PairFactory(project=project), PairFactory(project=other)
    assert query_of_project(project=project, query_id=query.id) == query
    assert query_by_external_id(project=project, external_id="q1") == query
    assert pair_of_project(project=project, pair_id=pair.id) == pair
    with pytest.raises(NotFound, match="No Query matches the given query."):
        query_of_project(project=project, query_id=foreign_query.id)
    with pytest.raises(NotFound, match="No Query matches the given query."):
        query_by_external_id(project=project, external_id="q2")
    with pytest.raises(NotFound, match="No such item in this project."):
        pair_of_project(project=project, pair_id=foreign_pair.id)
    assert project_by_slug(slug="p") == project
    with pytest.raises(NotFound, match="no project 'nope'"):
        project_by_slug(slug="nope")
