"""The project header: one row of tabs per project page, showing only the pages the user's role may open, with
the counts an expert or an admin acts on (items waiting, conflicts). Who may open a tab is asked of the tab's
own view (the Need its project_view applies), so the header and the pages cannot disagree."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.urls import resolve, reverse
from django.utils import timezone

from labeling.models import Project
from labeling.selectors.adjudication import adjudication_counts
from labeling.selectors.queues import queue_progress

# (key, label, URL name), in the order the header shows them.
TABS = (
    ("overview", "Overview", "labeling:project_detail"),
    ("annotate", "Annotate", "labeling:workspace"),
    ("adjudicate", "Adjudicate", "labeling:adjudication"),
    ("judges", "Judges", "labeling:judges"),
    ("systems", "Systems", "labeling:systems"),
    ("finetune", "Fine-tuning", "labeling:finetune"),
    ("validation", "Validation", "labeling:validation"),
    ("rounds", "Rounds", "labeling:rounds"),
    ("replay", "Replay", "labeling:replay"),
    ("releases", "Releases", "labeling:releases"),
    ("definitions", "Definitions", "labeling:definitions"),
    ("members", "Members", "labeling:members"),
    ("settings", "Settings", "labeling:settings"),
)


@dataclass(frozen=True)
class Tab:
    key: str
    label: str
    url: str
    count: str | None  # shown beside the label: items waiting, conflicts
    count_label: str


def _opens(url: str, project: Project, role: str | None) -> bool:
    view = resolve(url).func
    if not getattr(view, "project_scoped", False):
        raise AssertionError(f"{url} is not a project page (labeling.views.access.project_view)")
    need = view.project_need
    return role is not None and (need is None or need.allows(project=project, role=role))


def project_tabs(*, user: AbstractBaseUser, project: Project, role: str | None) -> list[Tab]:
    """The tabs `user`, of `role` in `project`, may open there, with their counts."""
    tabs = []
    for key, label, name in TABS:
        url = reverse(name, kwargs={"slug": project.slug})
        if not _opens(url, project, role):
            continue
        count, count_label = None, ""
        if key == "annotate":
            count = queue_progress(project=project, annotator=user, now=timezone.now()).left_display
            count_label = "items waiting for you"
        elif key == "adjudicate":
            count = str(adjudication_counts(project=project)["conflict"])
            count_label = "conflicts to adjudicate"
        tabs.append(Tab(key=key, label=label, url=url, count=count, count_label=count_label))
    return tabs
