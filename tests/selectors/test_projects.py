"""Project visibility and per-project counts, checked against rows created by hand."""
import pytest
from django.utils import timezone

from labeling.exceptions import Forbidden, NotFound
from labeling.models import Membership
from labeling.selectors.projects import (
    ANNOTATE,
    READ_REPORTS,
    ProjectCounts,
    admin_to,
    pairs_for_project,
    project_for_user,
    project_list_for_user,
    projects_visible_to,
    queries_with_current_definition,
)
from tests.factories import (
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    PairSourceFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def populate(project):
    """3 queries, 4 passages, 2 pairs, 2 current labels (+1 superseded), 3 judgments."""
    queries = QueryFactory.create_batch(3, project=project)
    passages = PassageFactory.create_batch(4, project=project)
    first = PairFactory(project=project, query=queries[0], passage=passages[0])
    second = PairFactory(project=project, query=queries[1], passage=passages[1])
    LabelFactory(pair=first, superseded_at=timezone.now())
    LabelFactory(pair=first)
    LabelFactory(pair=second)
    JudgmentFactory.create_batch(2, pair=first)
    JudgmentFactory(pair=second)
    return ProjectCounts(queries=3, passages=4, pairs=2, labels=2, judgments=3)


def test_member_sees_own_projects_with_counts():
    user = UserFactory()
    mine, other = ProjectFactory(name="A"), ProjectFactory(name="B")
    MembershipFactory(user=user, project=mine)
    expected = populate(mine)
    populate(other)

    summaries = project_list_for_user(user=user)

    assert [s.project for s in summaries] == [mine]
    assert summaries[0].counts == expected


def test_superuser_sees_every_project_even_empty_ones():
    admin = UserFactory(is_superuser=True, is_staff=True)
    a, b = ProjectFactory(name="A"), ProjectFactory(name="B")
    expected = populate(a)

    summaries = project_list_for_user(user=admin)

    assert [s.project for s in summaries] == [a, b]
    assert summaries[0].counts == expected
    assert summaries[1].counts == ProjectCounts()


def test_staff_without_membership_sees_nothing():
    ProjectFactory()
    assert list(projects_visible_to(user=UserFactory(is_staff=True))) == []


def test_inactive_member_sees_nothing():
    membership = MembershipFactory(user=UserFactory(is_active=False))
    assert list(projects_visible_to(user=membership.user)) == []


def test_counting_does_not_grow_with_the_number_of_projects(django_assert_num_queries):
    user = UserFactory()
    for name in "ABCD":
        project = ProjectFactory(name=name)
        MembershipFactory(user=user, project=project)
        populate(project)
    # One query for the projects, then one grouped count per table.
    with django_assert_num_queries(6):
        summaries = project_list_for_user(user=user)
    assert len(summaries) == 4


def test_current_definition_is_the_newest_version():
    project = ProjectFactory()
    with_two, without = QueryFactory(project=project), QueryFactory(project=project)
    RelevanceDefinitionFactory(query=with_two, text="old")
    RelevanceDefinitionFactory(query=with_two, text="new")

    rows = {q.external_id: q for q in queries_with_current_definition(project=project)}

    newest = rows[with_two.external_id]
    assert (newest.current_definition_version, newest.current_definition_text) == (2, "new")
    assert rows[without.external_id].current_definition_version is None


def test_pairs_filter_by_query_external_id_within_the_project():
    project = ProjectFactory()
    pair = PairFactory(project=project)
    PairFactory(project=project)
    PairSourceFactory(pair=pair, system="bm25", rank=3)
    # A query with the same external id in another project must not leak in.
    PairFactory(query=QueryFactory(external_id=pair.query.external_id))

    pairs = list(pairs_for_project(project=project, query_external_id=pair.query.external_id))

    assert pairs == [pair]
    assert [(s.system, s.rank) for s in pairs[0].sources.all()] == [("bm25", 3)]


def _member(project, role):
    return MembershipFactory(project=project, role=role).user


def test_project_for_user_hides_a_project_from_a_non_member_and_refuses_a_role_with_the_need_s_words():
    project = ProjectFactory(slug="p")
    with pytest.raises(NotFound, match="No Project matches the given query."):
        project_for_user(user=UserFactory(), slug="p")
    with pytest.raises(NotFound):
        project_for_user(user=_member(project, Membership.Role.ADMIN), slug="other")
    expert = _member(project, Membership.Role.EXPERT)
    assert project_for_user(user=expert, slug="p") == project
    with pytest.raises(Forbidden, match=r"^Only a project admin can adjudicate\.$"):
        project_for_user(user=expert, slug="p", need=admin_to("adjudicate"))
    with pytest.raises(Forbidden, match="Experts label blind"):
        project_for_user(user=expert, slug="p", need=READ_REPORTS)


@pytest.mark.parametrize(
    ("role", "annotates", "reads_reports"),
    [(Membership.Role.ADMIN, True, True), (Membership.Role.EXPERT, True, False), (Membership.Role.VIEWER, False, True)],
)
def test_who_annotates_and_who_reads_the_reports(role, annotates, reads_reports):
    project = ProjectFactory(slug="p")
    user = _member(project, role)
    for need, allowed in ((ANNOTATE, annotates), (READ_REPORTS, reads_reports)):
        if allowed:
            assert project_for_user(user=user, slug="p", need=need) == project
        else:
            with pytest.raises(Forbidden, match=need.refused):
                project_for_user(user=user, slug="p", need=need)


def test_a_superuser_is_every_project_s_admin():
    ProjectFactory(slug="p")
    root = UserFactory(is_superuser=True)
    assert project_for_user(user=root, slug="p", need=admin_to("do this")).slug == "p"
