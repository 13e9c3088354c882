"""The loop this product exists for, as a person does it (#48): on the sample project that `make demo` loads
(ClimRetrieve, 16 queries x 446 passages, every pair in the pool, 595 reference grades, all relevant), with a real
Celery worker, an admin and an expert in two browser contexts at 1366 x 768.

The admin scores the pool with the embedding judge from the Judges page, reads on the Rounds page that a refit
cannot run yet (no non-relevant gold), and starts a round of 20 labels, half from the random validation sample.
The expert labels the round's items in the workspace by a fixed rule that reads only what the page shows (the
question's content words found in the passage). The worker measures, refits the judge's calibrator, measures
again and ends the round DONE; the Rounds page shows before -> after and the chart; the overview's completeness
card shows the model-based estimate (now that the judge has a calibrator) and the stopping state. Finally the admin
freezes a release and exports it.

Numbers are checked against independent references: the round's AUROC and F1 after the refit on the random
sample against scikit-learn on the expert's grades and the judge's calibrated P, and the export against the
gold grades and the judge's P read from the database."""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest
from sklearn.metrics import f1_score, roc_auc_score

from labeling.models import JudgeCalibration, Judgment, Label, LabellingRound, Pair, Project, ValidationResult
from labeling.selectors.export import judge_calibrator
from labeling.services.bundle_import import bundle_import
from tests.browser import log_in, needs_chromium
from tests.factories import MembershipFactory, UserFactory
from tests.polling import wait_for
from tests.scoring_fixtures import SAMPLE, minilm_judge

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_chromium]

VIEWPORT = {"width": 1366, "height": 768}
BUDGET = 20
WORD = re.compile(r"[a-z]{4,}")
# Words a question shares with almost any passage of a sustainability report: they tell nothing.
COMMON = {"what", "does", "which", "company", "companies", "their", "there", "with", "have", "from", "this",
          "that", "they", "into", "does", "about", "been", "were", "will", "climate", "change", "risks", "risk"}


def shot(page, name: str) -> None:
    """A whole-page screenshot to look at, when JOURNEY_SCREENSHOTS names a folder (the closing notes' figures)."""
    folder = os.environ.get("JOURNEY_SCREENSHOTS")
    if folder:
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


class Clock:
    """Seconds each step took, printed at the end (pytest -s): where the journey's time goes."""

    def __init__(self):
        self.start, self.laps = time.monotonic(), []

    def lap(self, name: str) -> None:
        self.laps.append((name, time.monotonic() - self.start))
        print(f"journey: {name} at {self.laps[-1][1]:.0f} s", flush=True)

    def __str__(self) -> str:
        return ", ".join(f"{name} {at:.0f} s" for name, at in self.laps)


def expert_grade(question: str, passage: str) -> int:
    """The expert's fixed rule, on what the workspace shows: 'relevant' (2) when the passage holds one of
    the question's content words, else 'irrelevant' (0)."""
    words = set(WORD.findall(question.lower())) - COMMON
    return 2 if words & set(WORD.findall(passage.lower())) else 0


def test_a_round_on_the_sample_scores_refits_shows_what_it_bought_and_its_qrels_are_released(
        worker, browser, live_server, settings):
    clock = Clock()
    bundle_import(path=SAMPLE, project_slug="climretrieve", all_pairs=True)
    project = Project.objects.get(slug="climretrieve")
    pool = project.pairs.count()
    assert pool == 16 * 446
    # The pool's random order, seeded here (an import draws its own), so that the journey is the same every run.
    pairs = list(project.pairs.order_by("id"))
    for pair, key in zip(pairs, np.random.default_rng(48).permutation(pool) / pool, strict=True):
        pair.sample_key = float(key)
    Pair.objects.bulk_update(pairs, ["sample_key"], batch_size=1000)
    judge = minilm_judge(project)
    clock.lap("imported")
    admin, expert = UserFactory(username="ada"), UserFactory(username="eve")
    MembershipFactory(project=project, user=admin, role="admin")
    MembershipFactory(project=project, user=expert, role="expert")
    base = f"{live_server.url}/projects/{project.slug}"

    # 1. The admin scores the pool with minilm from the Judges page; the worker scores every pair.
    page, admin_errors = log_in(browser, live_server, "ada", viewport=VIEWPORT)
    page.goto(f"{base}/judges/")
    row = page.locator("tr", has=page.locator("text=minilm")).first
    row.locator("select[name=scope]").select_option("missing")
    row.locator("button:has-text('Start')").click()
    clock.lap("scoring started")
    scored = Judgment.objects.filter(judge=judge, status=Judgment.Status.OK)
    wait_for(lambda: scored.count() == pool, "minilm did not score the pool", seconds=300, every=1)
    clock.lap("scored")
    settings.VALIDATION_REFRESH_MIN_SECONDS = 0  # from here each label's refresh runs at once

    # 2. The Rounds page says beforehand that a refit needs non-relevant gold, then starts a round of 20, half random.
    page.goto(f"{base}/rounds/")
    outlook = page.locator('[data-outlook="minilm"]')
    assert outlook.get_attribute("data-ready") == "no"
    # The sample's 595 reference grades are all relevant: chosen by their grade, they are no basis for a fit.
    assert "has scored 0 relevant and 0 non-relevant gold pairs to fit on" in outlook.inner_text()
    assert "The project's 595 reference grades are all relevant" in page.locator("[data-testid=fit-basis]").inner_text()
    form = page.locator("[data-testid=round-start]")
    form.locator("#round-judge").select_option("minilm")
    form.locator("#round-budget").fill(str(BUDGET))
    form.locator("#round-random").fill("50")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("text=Round 1 started")
    assert page.locator('tr[data-round="1"]').get_attribute("data-status") in ("pending", "running")

    # 3. The expert labels the round's items in the workspace by the fixed rule.
    gold_before = set(Pair.objects.filter(project=project, reference_grade__isnull=False)
                      .values_list("id", flat=True))
    expert_context = browser.new_context(viewport=VIEWPORT)
    work, expert_errors = log_in(expert_context, live_server, "eve")
    work.goto(f"{base}/annotate/")
    graded: dict[int, int] = {}
    for _ in range(BUDGET):
        item = work.locator("section.ws-item")
        pair_id = int(item.get_attribute("data-pair"))
        question = item.locator(".ws-question strong").inner_text()
        passage = item.locator("[data-testid=passage]").inner_text()
        grade = expert_grade(question, passage)
        work.locator(f"#label-form button[name=grade][value='{grade}']").click()
        work.wait_for_function(
            f"() => !document.querySelector('section.ws-item[data-pair=\"{pair_id}\"]')", timeout=15_000)
        graded[pair_id] = grade
    clock.lap("labelled")
    assert len(graded) == BUDGET and not set(graded) & gold_before  # only pairs whose gold was unknown
    queues = list(Label.objects.filter(annotator=expert, pair_id__in=graded).values_list("queue", flat=True))
    assert queues.count("random") == BUDGET // 2
    assert 0 < sum(1 for g in graded.values() if g) < BUDGET, graded  # the rule gives both grades here

    # 4. The worker measures, refits minilm's calibrator, measures again: the round is done with before -> after.
    done = LabellingRound.objects.filter(project=project, number=1, status=LabellingRound.Status.DONE)
    wait_for(done.exists, "the round did not end done", seconds=180, every=1)
    found = done.get()
    clock.lap("round done")
    assert not found.error and "reason" not in found.numbers, found.numbers
    assert JudgeCalibration.objects.filter(judge=judge).exists()
    page.goto(f"{base}/rounds/")
    round_row = page.locator('tr[data-round="1"]')
    assert round_row.get_attribute("data-status") == "done"
    assert page.locator("[data-chart=rounds]").count() == 1
    # The random validation sample: the pool in its random order up to the first pair whose gold is unknown (the
    # expert's random items, and the reference-graded pairs among them).
    assert Label.objects.filter(annotator=expert, queue="random").count() == BUDGET // 2
    gold = {**dict(Pair.objects.filter(project=project, reference_grade__isnull=False)
                   .values_list("id", "reference_grade")), **graded}
    sample = []
    for pair_id in Pair.objects.filter(project=project).order_by("sample_key").values_list("id", flat=True):
        if pair_id not in gold:
            break
        sample.append(pair_id)
    truth = [int(gold[pair_id] >= 1) for pair_id in sample]
    calibrated = _calibrated_p(judge, sample)
    after = found.numbers["after"]["judge_accuracy"]["sample"]
    assert after["n"] == len(sample) >= BUDGET // 2
    if 0 < sum(truth) < len(truth):
        assert after["auroc"]["value"] == pytest.approx(roc_auc_score(truth, calibrated))
    assert after["f1"]["value"] == pytest.approx(f1_score(truth, [int(p >= 0.5) for p in calibrated],
                                                          zero_division=0.0))
    for name in ("auroc", "ece", "kappa", "f1"):
        assert "→" in round_row.locator(f"td[data-{name}]").inner_text()
    shot(page, "rounds")

    # 5. The overview's completeness card: minilm is calibrated now, so the model-based estimate shows.
    # It reads the cached validation report: the one a worker computes once the round's refit is in.
    refit = JudgeCalibration.objects.filter(judge=judge).latest("created_at")
    report = ValidationResult.objects.filter(project=project, computed_at__gt=refit.created_at)
    wait_for(lambda: any(not result.is_stale and result.data for result in report.all()), "no report after the round",
             seconds=120, every=0.5)
    page.goto(f"{base}/")
    clock.lap("overview")
    card = page.locator("[data-testid=completeness]")
    page.wait_for_selector("[data-completeness=model]")
    shot(page, "overview")
    assert "withheld" not in card.locator("[data-completeness=model]").inner_text()
    assert re.search(r"P\(recall ≥ [\d.]+\) = [\d.]+", card.locator("[data-completeness=stopping]").inner_text())

    # 6. The admin freezes the qrels (gold where known, else minilm's calibrated P) and exports them as TREC.
    page.goto(f"{base}/releases/")
    page.fill("#release-name", "round-1")
    page.select_option("#release-source", "combined:minilm")
    page.click("[data-testid=freeze-form] button[type=submit]")
    page.wait_for_selector('tr[data-release="round-1"]')
    with page.expect_download() as download:
        page.click('tr[data-release="round-1"] a[data-export=trec]')
    lines = download.value.path().read_text().splitlines()
    assert len(lines) == pool
    exported = {(query, passage): int(grade) for query, _, passage, grade in (line.split() for line in lines)}
    labelled = Pair.objects.get(id=next(iter(graded)))
    assert exported[(labelled.query.external_id, labelled.passage.external_id)] == graded[labelled.id]
    assert admin_errors == [] and expert_errors == []
    expert_context.close()
    clock.lap("released")
    print(clock)


def _calibrated_p(judge, pair_ids: list[int]) -> list[float]:
    """The judge's P on the pairs through its newest calibrator, from the stored judgments."""
    raw = dict(Judgment.objects.filter(judge=judge, pair_id__in=pair_ids).values_list("pair_id", "p_relevant"))
    return judge_calibrator(judge).apply(np.asarray([raw[pair_id] for pair_id in pair_ids], dtype=float)).tolist()
