"""Every URL of the labeling app and its API, reversed against one small project in which each role has a user:
the role matrix, the security headers and the escaping tests walk the same list, so a new endpoint is checked
by all three as soon as it is routed."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.urls import URLPattern, URLResolver, reverse
from django.utils import timezone

from labeling import urls as html_urls
from labeling.api import urls as api_urls
from labeling.models import (
    AuditJob,
    BundleImportJob,
    Estimate,
    FineTuneJob,
    Invitation,
    Judge,
    Membership,
    Pair,
    Project,
    QrelsRelease,
    Query,
    QueryGenerationJob,
    ReplayJob,
    RetrievalJob,
    Run,
    RunEntry,
    ScoringJob,
    TrainingExample,
    TrainingSet,
)
from labeling.services.invitations import invitation_create
from labeling.services.releases import release_create
from labeling.services.validation import validation_result_ensure
from tests.factories import (
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

ANONYMOUS, OUTSIDER = "anonymous", "non-member"
VIEWER, EXPERT, ADMIN = Membership.Role.VIEWER.value, Membership.Role.EXPERT.value, Membership.Role.ADMIN.value
ROLES = (ANONYMOUS, OUTSIDER, VIEWER, EXPERT, ADMIN)


@dataclass(frozen=True)
class Route:
    name: str  # namespaced: "labeling:workspace", "api:label-list"
    pattern: URLPattern

    @property
    def is_api(self) -> bool:
        return self.name.startswith("api:")

    @property
    def class_methods(self) -> set[str] | None:
        """The HTTP methods a class-based view handles (None for a function view, which cannot be asked)."""
        view_class = getattr(self.pattern.callback, "view_class", None) or getattr(self.pattern.callback, "cls", None)
        if view_class is None:
            return None
        return {m.upper() for m in ("get", "post", "put", "patch", "delete") if hasattr(view_class, m)}


def _walk(patterns: list, namespace: str) -> list[Route]:
    routes = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}:{entry.namespace}" if entry.namespace else namespace
            routes += _walk(entry.url_patterns, inner)
        elif entry.name:
            routes.append(Route(f"{namespace}:{entry.name}", entry))
    return routes


def all_routes() -> list[Route]:
    return _walk(html_urls.urlpatterns, html_urls.app_name) + _walk(api_urls.urlpatterns, api_urls.app_name)


@dataclass
class World:
    project: Project
    query: Query
    pair: Pair
    conflict: Pair  # two experts disagree on it: the adjudication queue has an item
    judge: Judge
    job: ScoringJob
    run: Run
    retrieval_job: RetrievalJob  # running
    training_set: TrainingSet  # imported from a file, used by no job
    finetune_job: FineTuneJob  # running, its worker reporting
    bundle_job: BundleImportJob  # failed, with a problem naming its file and line
    audit: AuditJob  # a running perturbation audit of the judge
    generation: QueryGenerationJob  # a finished query generation by the judge, with one unreadable answer
    estimate: Estimate  # the judge's scoring estimate, failed with its reason
    release: QrelsRelease  # the human qrels frozen as "release-a"
    replay: ReplayJob  # running: 1 of its 2 runs replayed
    member: object  # an expert other than the role users: the one a member removal targets
    invitation: Invitation  # open: its link's token is `invitation_token`
    invitation_token: str
    users: dict[str, object] = field(default_factory=dict)

    def kwargs(self, route: Route) -> dict[str, object]:
        values = {
            "slug": self.project.slug,
            "query_id": self.query.id,
            "query_external_id": self.query.external_id,
            "pair_id": self.conflict.id,
            "judge": self.judge.name,
            "job_id": self.job.id,
            "user_id": self.member.id,
            "run_id": self.run.id,
            "retrieval_job_id": self.retrieval_job.id,
            "training_set": self.training_set.name,
            "finetune_job_id": self.finetune_job.id,
            "bundle_job_id": self.bundle_job.id,
            "audit_id": self.audit.id,
            "generation_id": self.generation.id,
            "estimate_id": self.estimate.id,
            "release": self.release.name,
            "replay_id": self.replay.id,
            "invitation_id": self.invitation.id,
            "token": self.invitation_token,
        }
        missing = set(route.pattern.pattern.converters) - set(values)
        assert not missing, f"{route.name}: no fixture value for URL argument(s) {sorted(missing)}; add them to World"
        return {name: values[name] for name in route.pattern.pattern.converters}

    def url(self, route: Route) -> str:
        return reverse(route.name, kwargs=self.kwargs(route))


def build_world(
    *,
    query_text: str = "Which emission targets does the company set?",
    definition_text: str = "Numeric targets for greenhouse gas emissions.",
    passage_title: str = "Targets",
    passage_text: str = "We cut emissions by 40% by 2030.",
    note: str = "clear target",
    name: str = "Climate",
    judge_name: str = "judge-a",
    member_name: str = "alice",
    with_report: bool = False,
) -> World:
    """One project with a member of every role, a query with a definition, three pairs (one labelled by the
    expert, one labelled 0 and 2 by two other experts), a judge with judgments and a running scoring job, a run
    ranking the three passages, a running retrieval job, a training set imported from a file and a running
    fine-tuning job on another set, a running audit of the judge, a running replay."""
    project = ProjectFactory(name=name, description=name)
    query = QueryFactory(project=project, text=query_text, metadata={"topic": name})
    RelevanceDefinitionFactory(query=query, text=definition_text)
    pairs = [
        PairFactory(project=project, query=query,
                    passage=PassageFactory(project=project, title=passage_title, text=f"{passage_text} ({i})"))
        for i in range(3)
    ]
    users = {ANONYMOUS: None, OUTSIDER: UserFactory(username="outsider")}
    for role in (VIEWER, EXPERT, ADMIN):
        users[role] = UserFactory(username=role)
        MembershipFactory(project=project, user=users[role], role=role)
    alice, bob = UserFactory(username=member_name), UserFactory(username="bob")
    for user in (alice, bob):
        MembershipFactory(project=project, user=user, role=EXPERT)
    now = timezone.now()
    LabelFactory(pair=pairs[0], annotator=users[EXPERT], grade=2, note=note, created_at=now)
    LabelFactory(pair=pairs[1], annotator=alice, grade=0, note=note, created_at=now)
    LabelFactory(pair=pairs[1], annotator=bob, grade=2, note=note, created_at=now)
    judge = JudgeFactory(project=project, name=judge_name, prompt=name)
    for pair, p in zip(pairs, (0.9, 0.4, 0.1)):
        JudgmentFactory(pair=pair, judge=judge, p_relevant=p)
    job = ScoringJob.objects.create(project=project, judge=judge, scope=ScoringJob.Scope.ALL, total=3, done=1,
                                    failed=1, last_error=name, created_by=users[ADMIN])
    run = Run.objects.create(project=project, name="run-a", kind=Run.Kind.IMPORTED, queries=1, entries=3, depth=3)
    RunEntry.objects.bulk_create(RunEntry(run=run, query=query, passage=pair.passage, rank=rank, score=1 / rank)
                                 for rank, pair in enumerate(pairs, 1))
    retrieval_job = RetrievalJob.objects.create(project=project, retriever=Run.Kind.BM25, name="run-b", total=1,
                                                status=RetrievalJob.Status.RUNNING, requested_by=users[ADMIN])
    training_set = TrainingSet.objects.create(project=project, name="set-a", source="set-a.csv")
    TrainingExample.objects.create(training_set=training_set, split=TrainingExample.Split.TRAIN,
                                   origin=TrainingExample.Origin.FILE, group=query_text, system="Judge usefulness.",
                                   user=f"Question: {query_text}", answer="[Guess]: Yes. [Confidence]: 0.8.")
    used = TrainingSet.objects.create(project=project, name="set-b", source="run run-a")
    finetune_job = FineTuneJob.objects.create(
        project=project, training_set=used, teacher=judge, base_model="var/models/base", student_name="student-a",
        status=FineTuneJob.Status.RUNNING, started_at=now, heartbeat_at=now, examples=8, step=2, total_steps=4,
        loss_history=[[1, 2.5], [2, 1.75]], requested_by=users[ADMIN],
    )
    bundle_job = BundleImportJob.objects.create(
        project=project, file_name=f"{name}.zip", size=100, status=BundleImportJob.Status.FAILED, finished_at=now,
        stage=BundleImportJob.Stage.FINISHED, problems=[f"queries.jsonl:2: {note}"], problems_total=1,
        requested_by=users[ADMIN],
    )
    audit = AuditJob.objects.create(project=project, judge=judge, kind=AuditJob.Kind.PERTURBATION, total=9, done=3,
                                    status=AuditJob.Status.RUNNING, started_at=now, heartbeat_at=now,
                                    parameters={"sample": 1, "seed": 0}, requested_by=users[ADMIN])
    generation = QueryGenerationJob.objects.create(
        project=project, judge=judge, query_set="llm", total=2, done=2, created=1, calls=4,
        status=QueryGenerationJob.Status.DONE, started_at=now, finished_at=now, requested_by=users[ADMIN],
        parameters={"intents": ["FC"], "passages": ["p1", "p2"], "seed": 0, "prompts": {}, "positive_grade": None,
                    "selection": "2 named passages"},
        problems=[{"passage": "p2", "intent": "FC", "stage": "query", "error": "no JSON object", "raw": note}])
    estimate = Estimate.objects.create(
        project=project, judge=judge, scope=ScoringJob.Scope.MISSING, status=Estimate.Status.FAILED,
        started_at=now, finished_at=now, error="the model folder holds no loadable tokenizer",
        requested_by=users[ADMIN])
    invited = invitation_create(project=project, username="newcomer", role=EXPERT, by=users[ADMIN])
    release = release_create(project=project, by=users[ADMIN], name="release-a")
    replay = ReplayJob.objects.create(
        project=project, total=2, done=1, status=ReplayJob.Status.RUNNING, started_at=now, heartbeat_at=now,
        parameters={"judges": [judge.name], "mixes": [{"random": 100.0}], "batch": 1, "rounds": 1, "seeds": 2,
                    "truth": "trec", "refit": True, "target": 0.9, "alpha": 0.1},
        requested_by=users[ADMIN])
    if with_report:
        validation_result_ensure(project=project)
    return World(project=project, query=query, pair=pairs[0], conflict=pairs[1], judge=judge, job=job, run=run,
                 retrieval_job=retrieval_job, training_set=training_set, finetune_job=finetune_job,
                 bundle_job=bundle_job, audit=audit, generation=generation, estimate=estimate,
                 release=release, replay=replay, member=alice, invitation=invited.invitation,
                 invitation_token=invited.token, users=users)
