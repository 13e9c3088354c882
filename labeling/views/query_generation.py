"""HTML: LLM query generation (DisastIR 3.4), a section of the Systems page: the project's generation jobs for its
members, and for its admins the form that estimates one (dry run) or starts it (labeling.views.systems's
query_generation_start_view). The service is the command's and the API's."""
from __future__ import annotations

from labeling.forms import QueryGenerationForm
from labeling.models import Project
from labeling.selectors.query_generation import RECENT, query_generations
from labeling.selectors.scoring import judges_for_project


def query_generation_form(project: Project, data: dict | None = None) -> QueryGenerationForm:
    return QueryGenerationForm(data, judges=[judge.name for judge in judges_for_project(project)
                                             if judge.is_generative],
                               grades=[(grade.value, grade.name) for grade in project.label_scale.grades])


def query_generation_context(project: Project, form: QueryGenerationForm | None = None) -> dict:
    """The page's section: the newest jobs and the form (the admins')."""
    return {"generations": list(query_generations(project)[:RECENT]),
            "generation_form": form or query_generation_form(project)}
