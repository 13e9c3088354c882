"""The browse pages through the test client: each role's view of the same pair and the same query (blind first),
the filters and the keyset cursor links, bad input as a 400, and a page whose SQL query count does not grow with
its size."""
from __future__ import annotations

import html as html_lib
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from labeling.models import Judgment, Pair
from tests.browser import log_in, needs_chromium
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    PairSourceFactory,
    PassageFactory,
    QueryFactory,
    UserFactory,
)
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world

pytestmark = pytest.mark.django_db

REFERENCE_SOURCE = "qrels/browse-marker.tsv"
OTHERS_NOTE = "note-of-alice"
OWN_NOTE = "my-own-note"
RAW_OUTPUT = "[Reason]: it states a target. [Guess]: Yes"
# The world's judge P of its three pairs: the expert labelled the first; alice and bob the second.
P_VALUES = (0.9137, 0.4262, 0.1391)


@pytest.fixture
def world():
    world = build_world(note=OWN_NOTE)
    pairs = list(world.project.pairs.order_by("id"))
    Pair.objects.filter(project=world.project).update(reference_grade=2, reference_source=REFERENCE_SOURCE)
    for pair, p in zip(pairs, P_VALUES):
        Judgment.objects.filter(pair=pair).update(p_relevant=p, raw_output=RAW_OUTPUT)
    world.conflict.labels.filter(annotator__username="alice").update(note=OTHERS_NOTE)
    PairSourceFactory(pair=world.conflict, system="bm25-marker", rank=7)
    return world


def _get(client, world, role, name, **kwargs):
    client.force_login(world.users[role])
    return client.get(reverse(f"labeling:{name}", args=[world.project.slug, *kwargs.values()]))


def _pair(client, world, role, pair):
    return _get(client, world, role, "browse_pair", pair_id=pair.id).content.decode()


@pytest.mark.parametrize("role", [ADMIN, VIEWER])
def test_admins_and_viewers_see_everything_of_a_pair(client, world, role):
    html = _pair(client, world, role, world.conflict)
    assert REFERENCE_SOURCE in html and OTHERS_NOTE in html and "bm25-marker" in html
    assert "0.4262" in html and "[Reason]: it states a target." in html
    assert 'data-testid="gold"' in html


def test_an_expert_sees_a_pair_they_did_not_label_blind(client, world):
    html = _pair(client, world, EXPERT, world.conflict)
    assert REFERENCE_SOURCE not in html and OTHERS_NOTE not in html and 'data-testid="gold"' not in html
    assert not any(f"{p:.2f}" in html for p in P_VALUES) and "[Reason]" not in html
    assert "bm25-marker" in html  # pool sources are not part of what experts label blind to
    assert "You have not labelled this pair." in html


def test_an_expert_sees_their_own_label_and_the_p_only_once_labelled_where_the_project_reveals_it(client, world):
    html = _pair(client, world, EXPERT, world.pair)
    assert OWN_NOTE in html and REFERENCE_SOURCE not in html and "0.91" not in html
    world.project.reveal_llm_after_submit = True
    world.project.save(update_fields=["reveal_llm_after_submit"])
    html = _pair(client, world, EXPERT, world.pair)
    assert "0.9137" in html and RAW_OUTPUT.split(".")[0] in html and REFERENCE_SOURCE not in html
    html = _pair(client, world, EXPERT, world.conflict)
    assert "0.43" not in html and OTHERS_NOTE not in html


def test_each_role_sees_the_query_page_as_blind_first_allows(client, world):
    admin = _get(client, world, ADMIN, "browse_query", query_id=world.query.id).content.decode()
    assert all(f"{p:.3f}" in admin for p in P_VALUES) and "alice" in admin and "Gold grade" in admin
    expert = _get(client, world, EXPERT, "browse_query", query_id=world.query.id).content.decode()
    assert not any(f"{p:.2f}" in expert for p in P_VALUES) and "alice" not in expert
    assert 'name="gold"' not in expert and "You label blind" in expert
    world.project.reveal_llm_after_submit = True
    world.project.save(update_fields=["reveal_llm_after_submit"])
    expert = _get(client, world, EXPERT, "browse_query", query_id=world.query.id).content.decode()
    assert "0.914" in expert and "0.43" not in expert and "0.139" not in expert


def test_an_expert_may_not_filter_by_what_they_label_blind_to(client, world):
    client.force_login(world.users[EXPERT])
    url = reverse("labeling:browse_query", args=[world.project.slug, world.query.id])
    assert client.get(url, {"gold": "2"}).status_code == 400
    assert client.get(url, {"disagreement": "experts"}).status_code == 400
    assert client.get(url, {"q": "emissions"}).status_code == 200


@pytest.mark.parametrize("params", [{"after": "0"}, {"before": "99999999999999999999999"}, {"p_min": "2"},
                                    {"gold": "x"}, {"n": "0"}, {"judge": "nobody"}])
def test_bad_filters_and_cursors_are_a_bad_request_that_says_why(client, world, params):
    client.force_login(world.users[ADMIN])
    url = reverse("labeling:browse_query", args=[world.project.slug, world.query.id])
    for headers in ({}, {"HX-Request": "true"}):
        response = client.get(url, params, headers=headers)
        assert response.status_code == 400
        assert 'role="alert"' in response.content.decode()


def test_filters_narrow_the_page_and_the_cursor_links_keep_them(client, world):
    query = QueryFactory(project=world.project)
    judge = JudgeFactory(project=world.project, name="second")
    pairs = []
    for i in range(7):
        text = f"Passage {i} about {'COAL' if i % 2 else 'wind'}."
        pair = PairFactory(project=world.project, query=query, passage=PassageFactory(project=world.project, text=text))
        JudgmentFactory(pair=pair, judge=judge, p_relevant=i / 10, created_at=timezone.now())
        pairs.append(pair)
    client.force_login(world.users[ADMIN])
    url = reverse("labeling:browse_query", args=[world.project.slug, query.id])
    html = client.get(url, {"q": "coal", "judge": "second", "p_min": "0.2", "n": "1"}).content.decode()
    shown = re.findall(r'<tr data-pair="(\d+)"', html)
    assert shown == [str(pairs[3].id)]  # coal: 1, 3, 5; P >= 0.2: 3, 5
    assert "<mark>COAL</mark>" in html
    next_url = re.search(r'href="(\?[^"]*after=\d+[^"]*)" hx-get', html).group(1).replace("&amp;", "&")
    assert all(part in next_url for part in ("q=coal", "judge=second", "p_min=0.2", "n=1"))
    html = client.get(url + next_url).content.decode()
    assert re.findall(r'<tr data-pair="(\d+)"', html) == [str(pairs[5].id)]
    assert "Next &rarr;" not in html and "&larr; Previous" in html


def test_the_query_page_costs_the_same_queries_at_any_page_size(client, world):
    query = QueryFactory(project=world.project)
    users = [UserFactory(username=f"expert-{i}") for i in range(3)]
    for i in range(40):
        pair = PairFactory(project=world.project, query=query)
        PairSourceFactory(pair=pair, system="bm25", rank=i + 1)
        JudgmentFactory(pair=pair, judge=world.judge, p_relevant=0.5, created_at=timezone.now())
        for j, user in enumerate(users):  # they agree on every third pair and disagree on the 26 others
            LabelFactory(pair=pair, annotator=user, grade=0 if i % 3 == 0 else (i + j) % 3, created_at=timezone.now())
    client.force_login(world.users[ADMIN])
    url = reverse("labeling:browse_query", args=[world.project.slug, query.id])
    counts = {}
    for n in (2, 40):
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url, {"n": str(n), "disagreement": "experts", "p_min": "0.1"})
        assert response.status_code == 200
        assert len(re.findall(r"<tr data-pair=", response.content.decode())) == min(n, 26)
        counts[n] = len(captured)
    assert counts[2] == counts[40]


def test_the_query_list_links_each_query_with_its_pair_counts(client, world):
    html = _get(client, world, EXPERT, "browse_queries").content.decode()
    assert reverse("labeling:browse_query", args=[world.project.slug, world.query.id]) in html
    assert 'data-pairs="3"' in html and 'data-labelled="2"' in html
    detail = _get(client, world, VIEWER, "project_detail").content.decode()
    assert reverse("labeling:browse_query", args=[world.project.slug, world.query.id]) in detail


def _text(fragment: str) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_several_judges_share_one_cell_per_row_a_line_each_in_name_order(client, world):
    pairs = list(world.project.pairs.order_by("id"))
    for name, values in (("zeta", (0.25, None, 0.75)), ("beta", (0.5, 0.125, None))):
        judge = JudgeFactory(project=world.project, name=name)
        for pair, p in zip(pairs, values):
            if p is not None:
                JudgmentFactory(pair=pair, judge=judge, p_relevant=p, created_at=timezone.now())
    html = _get(client, world, ADMIN, "browse_query", query_id=world.query.id).content.decode()
    # Pair, passage, gold, labels, the judges' P and pool sources: one column for the three judges.
    assert len(re.findall(r"<th[ >]", html)) == 6 and "Judges' P" in html
    # No judgment is under the current definition: every P is marked stale; a pair a judge has not judged, a dash.
    expected = {
        pairs[0].id: ["beta 0.500 stale", "judge-a 0.914 stale", "zeta 0.250 stale"],
        pairs[1].id: ["beta 0.125 stale", "judge-a 0.426 stale", "zeta –"],
        pairs[2].id: ["beta –", "judge-a 0.139 stale", "zeta 0.750 stale"],
    }
    for pair_id, row in re.findall(r'<tr data-pair="(\d+)">(.*?)</tr>', html, re.DOTALL):
        cells = re.findall(r'<td class="browse-judges">(.*?)</td>', row, re.DOTALL)
        assert len(cells) == 1, pair_id
        lines = re.split(r'(?=<span class="browse-judge-p")', cells[0])[1:]
        assert [_text(line) for line in lines] == expected[int(pair_id)]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_the_pair_table_of_four_judges_fits_a_1366_pixel_screen(browser, live_server):
    world = build_world(passage_title="Sustainability report 2023, section 4: climate targets and the baseline year",
                        passage_text="We commit to reducing scope 1 and 2 emissions by 42% by 2030 from 2019. " * 4)
    pairs = list(world.project.pairs.order_by("id"))
    for name in ("minilm-l6-cross-encoder", "smollm2-360m-instruct", "qwen2.5-1.5b-instruct"):
        judge = JudgeFactory(project=world.project, name=name)
        for i, pair in enumerate(pairs):
            JudgmentFactory(pair=pair, judge=judge, p_relevant=i / 4, created_at=timezone.now())
    for pair in pairs:
        PairSourceFactory(pair=pair, system="splade-v3-distil", rank=12)
    page, errors = log_in(browser, live_server, world.users[ADMIN].username, viewport={"width": 1366, "height": 768})
    page.goto(f"{live_server.url}{reverse('labeling:browse_query', args=[world.project.slug, world.query.id])}")
    widths = page.evaluate("""() => {
        const scroll = document.querySelector('.table-scroll');
        return [document.documentElement.scrollWidth, window.innerWidth, scroll.scrollWidth, scroll.clientWidth];
    }""")
    assert widths[0] <= widths[1] and widths[2] <= widths[3], widths
    assert page.locator("tr[data-pair] td.browse-judges").count() == 3
    assert page.locator("tr[data-pair]").first.locator("[data-judge]").count() == 4
    assert errors == []
    page.close()
