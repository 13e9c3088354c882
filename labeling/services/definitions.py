"""Definition writes: saving a query's relevance definition as a new version, and re-scoring the pairs whose
judgments were made under an older version."""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from labeling.exceptions import DomainError
from labeling.models import Judge, Project, Query, RelevanceDefinition, ScoringJob
from labeling.selectors.definitions import stale_pairs
from labeling.services.scoring import scoring_job_create

MAX_DEFINITION_CHARS = 50_000


class DefinitionError(DomainError):
    """A definition that cannot be saved as given, or a re-scoring with nothing to do; the message says why."""


def _normalized(text: str) -> str:
    # Browsers send a textarea's line breaks as CRLF: without this an unchanged text would look changed.
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


@transaction.atomic
def definition_save(
    *, query: Query, text: str, author: AbstractBaseUser | None, based_on: RelevanceDefinition | None = None
) -> RelevanceDefinition:
    """Store `text` as the query's next definition version (1 for the first), which becomes current. The query
    row is locked while the version is chosen, so concurrent saves get consecutive versions instead of a unique
    violation. `based_on` is the LLM draft an admin reviewed (and maybe edited) to write `text`: the new version
    keeps the draft's origin and judge."""
    text = _normalized(text)
    if not text:
        raise DefinitionError("the definition is empty: write what makes a passage relevant to the query")
    if len(text) > MAX_DEFINITION_CHARS:
        raise DefinitionError(
            f"the definition has {len(text):,} characters; the limit is {MAX_DEFINITION_CHARS:,}"
        )
    if based_on is not None and (based_on.query_id != query.id or not based_on.is_draft):
        raise DefinitionError(f"version {based_on.version} is not a draft of query {query.external_id!r}")
    Query.objects.select_for_update().only("id").get(id=query.id)
    versions = RelevanceDefinition.objects.filter(query=query).order_by("-version")
    latest, current = versions.first(), versions.in_use().first()
    if current is not None and current.text == text:
        raise DefinitionError(f"the definition is unchanged from version {current.version}: nothing was saved")
    version = latest.version + 1 if latest is not None else 1
    origin = {}
    if based_on is not None:
        origin = {"based_on": based_on, "origin": based_on.origin, "drafted_by_id": based_on.drafted_by_id}
    return RelevanceDefinition.objects.create(query=query, version=version, text=text, author=author, **origin)


@transaction.atomic
def stale_rescore_request(*, project: Project, query: Query, judge: Judge, user: AbstractBaseUser | None) -> ScoringJob:
    """Start a scoring job over exactly the query's pairs whose judgments by `judge` were all made under an
    older definition, leaving out those a running job has queued already. ScoringError propagates when the
    judge cannot score (an imported judge, a broken configuration)."""
    if query.project_id != project.id:
        raise DefinitionError(f"query {query.external_id!r} belongs to another project")
    if judge.project_id != project.id:
        raise DefinitionError(f"judge {judge.name!r} belongs to another project")
    # Two clicks at once must not both find nothing queued and start two jobs over the same pairs.
    Judge.objects.select_for_update().only("id").get(id=judge.id)
    found = stale_pairs(project=project, query=query, judge=judge)
    if not found:
        raise DefinitionError(f"judge {judge.name!r} has no stale judgments of query {query.external_id!r}: "
                              "nothing to re-score")
    (stale,) = found
    if not stale.to_rescore:
        raise DefinitionError(f"the {len(stale.pair_ids):,} stale pairs of judge {judge.name!r} are queued in a "
                              "running job already: they are judged under the current definition when it reaches them")
    return scoring_job_create(
        project=project, judge=judge, scope=ScoringJob.Scope.SELECTION, pair_ids=sorted(stale.to_rescore), user=user
    )
