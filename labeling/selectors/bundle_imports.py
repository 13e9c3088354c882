"""Reads of bundle import jobs as the Import page and the API list them: newest first."""
from __future__ import annotations

from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import BundleImportJob, Project

# The page and the API list this many of the newest imports: older ones only matter through the rows they wrote.
LISTED_IMPORTS = 50


def bundle_imports(project: Project) -> QuerySet[BundleImportJob]:
    """The project's LISTED_IMPORTS newest bundle imports, with who asked."""
    return (BundleImportJob.objects.filter(project=project).select_related("requested_by")
            .order_by("-created_at", "-id")[:LISTED_IMPORTS])


def bundle_import_of_project(*, project: Project, job_id: int) -> BundleImportJob:
    found = BundleImportJob.objects.filter(project=project, id=job_id).select_related("requested_by").first()
    if found is None:
        raise NotFound("No bundle import matches the given query.")
    return found
