"""The HTML pages through the test client: login, visibility (404 for non-members), counts, escaping."""
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.models import ScoringJob
from labeling.views.projects import QUERIES_PER_PAGE
from tests.factories import (
    PASSWORD,
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

LIST_URL = reverse("labeling:project_list")


def detail_url(project) -> str:
    return reverse("labeling:project_detail", args=[project.slug])


def shown_counts(html: str) -> list[dict[str, int]]:
    """The counts as the page shows them, one dict per project row (or one for the detail page)."""
    cells = re.findall(r'data-count="(\w+)">(\d+)<', html)
    rows, row = [], {}
    for name, value in cells:
        if name in row:
            rows.append(row)
            row = {}
        row[name] = int(value)
    return rows + [row] if row else rows


@pytest.fixture
def member(client):
    user = UserFactory()
    client.force_login(user)
    return user


@pytest.mark.parametrize("url", [LIST_URL, "/projects/any/"])
def test_pages_redirect_anonymous_users_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


def test_login_with_password_lands_on_project_list(client):
    user = UserFactory()
    page = client.get(reverse("login"))
    assert page.status_code == 200
    response = client.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == LIST_URL


def test_logout_is_a_post_and_ends_the_session(client, member):
    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert client.get(LIST_URL).status_code == 302


def test_header_shows_user_and_admin_link_only_for_staff(client, member):
    html = client.get(LIST_URL).content.decode()
    assert member.username in html
    assert reverse("admin:index") not in html
    assert 'hx-headers=\'{"X-CSRFToken": "' in html
    assert "vendor/htmx-" in html

    client.force_login(UserFactory(is_staff=True))
    assert reverse("admin:index") in client.get(LIST_URL).content.decode()


def test_project_list_shows_member_projects_with_counts(client, member):
    mine = ProjectFactory(name="Alpha")
    MembershipFactory(user=member, project=mine)
    hidden = ProjectFactory(name="Hidden")
    queries = QueryFactory.create_batch(3, project=mine)
    passages = PassageFactory.create_batch(5, project=mine)
    pairs = [PairFactory(project=mine, query=queries[i % 3], passage=passages[i]) for i in range(4)]
    LabelFactory(pair=pairs[0])
    LabelFactory(pair=pairs[1])
    LabelFactory(pair=pairs[1], superseded_at=timezone.now())  # history, not a current label
    JudgmentFactory(pair=pairs[2])
    PairFactory(project=hidden)

    response = client.get(LIST_URL)

    html = response.content.decode()
    assert "Alpha" in html
    assert "Hidden" not in html
    assert shown_counts(html) == [{"queries": 3, "passages": 5, "pairs": 4, "labels": 2, "judgments": 1}]


def test_superuser_sees_all_projects(client):
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    ProjectFactory(name="Alpha")
    ProjectFactory(name="Beta")
    html = client.get(LIST_URL).content.decode()
    assert "Alpha" in html and "Beta" in html


def test_project_list_without_projects_says_so(client, member):
    assert "not a member of any project" in client.get(LIST_URL).content.decode()


def test_detail_shows_scale_counts_and_queries(client, member):
    project = ProjectFactory(name="Alpha", description="About alpha.")
    MembershipFactory(user=member, project=project)
    query = QueryFactory(project=project, external_id="q-17", text="what is a llama")
    RelevanceDefinitionFactory(query=query)
    RelevanceDefinitionFactory(query=query)
    PairFactory(project=project, query=query)

    response = client.get(detail_url(project))

    assert response.status_code == 200
    html = response.content.decode()
    assert "About alpha." in html
    for name in ("irrelevant", "partially relevant", "relevant"):
        assert name in html
    assert "q-17" in html and "what is a llama" in html and "v2" in html
    assert shown_counts(html) == [{"queries": 1, "passages": 1, "pairs": 1, "labels": 0, "judgments": 0}]


@pytest.mark.parametrize("user_kind", ["plain", "staff"])
def test_detail_is_404_for_non_members(client, user_kind):
    client.force_login(UserFactory(is_staff=user_kind == "staff"))
    project = ProjectFactory()
    MembershipFactory(project=project)  # someone else is a member
    assert client.get(detail_url(project)).status_code == 404


def test_detail_is_404_for_unknown_project(client, member):
    assert client.get("/projects/no-such-project/").status_code == 404


def test_superuser_sees_any_project_detail(client):
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    assert client.get(detail_url(ProjectFactory())).status_code == 200


def test_untrusted_text_is_escaped(client, member):
    project = ProjectFactory(name="<b>bold</b>", description="<img src=x onerror=alert(1)>")
    MembershipFactory(user=member, project=project)
    QueryFactory(project=project, text="<script>alert('query')</script>")

    html = client.get(detail_url(project)).content.decode()

    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;query&#x27;)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "<b>bold</b>" not in html


def test_queries_page_through_htmx_returns_only_the_table(client, member):
    project = ProjectFactory()
    MembershipFactory(user=member, project=project)
    QueryFactory.create_batch(QUERIES_PER_PAGE, project=project)
    last = QueryFactory(project=project, external_id="the-last-one")

    first_page = client.get(detail_url(project)).content.decode()
    assert "the-last-one" not in first_page
    assert 'hx-get="?page=2"' in first_page

    response = client.get(detail_url(project), {"page": 2}, headers={"HX-Request": "true"})

    html = response.content.decode()
    assert last.external_id in html
    assert html.lstrip().startswith('<div id="query-table">')
    assert "<html" not in html


def test_htmx_history_restore_gets_the_full_page(client, member):
    project = ProjectFactory()
    MembershipFactory(user=member, project=project)
    response = client.get(
        detail_url(project), headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}
    )
    assert "<html" in response.content.decode()


def test_an_expert_opening_an_admin_page_gets_the_sites_page_saying_why_and_no_traceback_is_logged(client, caplog):
    project = ProjectFactory(name="Flood study")
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role="expert")
    client.force_login(expert)
    url = reverse("labeling:settings", args=[project.slug])
    with caplog.at_level("WARNING", logger="django.request"):
        response = client.get(url)
    assert response.status_code == 403
    html = response.content.decode()
    # The site's navigation and the project's tabs that an expert may open (not the one refused).
    assert 'class="site-nav"' in html and f'href="{LIST_URL}"' in html
    tabs = re.findall(r'data-tab="(\w+)"', html)
    assert "annotate" in tabs and "settings" not in tabs
    reason = re.search(r'data-testid="forbidden-reason">(.*?)</p>', html).group(1)
    assert re.sub(r"<[^>]+>", "", reason) == (
        "You are an expert of Flood study. Only a project admin can change the queue settings.")
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == f"Forbidden (Permission denied): {url}"
    assert record.exc_info is None and "Traceback" not in caplog.text


def test_the_overview_says_scoring_is_running_while_a_job_runs_and_counts_labels_against_the_pool(client):
    project = ProjectFactory()
    query = QueryFactory(project=project)
    pairs = [PairFactory(project=project, query=query, passage=PassageFactory(project=project)) for _ in range(4)]
    boss = UserFactory()
    MembershipFactory(project=project, user=boss, role="admin")
    judge = JudgeFactory(project=project, name="minilm")
    JudgmentFactory(pair=pairs[0], judge=judge)
    ScoringJob.objects.create(project=project, judge=judge, scope="missing", total=3, done=1)
    LabelFactory(pair=pairs[0], annotator=boss, grade=1)
    client.force_login(boss)
    html = client.get(detail_url(project)).content.decode()

    def step(key):
        item = re.search(rf'data-step="{key}" data-state="([^"]+)">(.*?)</li>', html, re.S)
        counts = re.search(r'step-counts small muted">(.*?)</span>\n', item.group(2)).group(1)
        target = re.search(r'step-target small muted">(.*?)</span>', item.group(2))
        return item.group(1), re.sub(r"<[^>]+>", "", counts), target and target.group(1)

    assert step("score") == ("running", "1 of 4 pairs judged by a judge · 1 job running · 1 of 3 pairs scored", None)
    assert step("label") == ("to do", "1 label · 1 of 4 pairs with a gold grade · 0 conflicts to adjudicate",
                             "Done when every pair has a gold grade, or set a stopping target in Settings.")
