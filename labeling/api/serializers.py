"""JSON shapes of the API: rows the selectors loaded, and the writes (starting a scoring job, saving a definition)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from labeling.api.fields import IdField, StrictBooleanField, StrictCharField, StrictFloatField, StrictIntegerField
from labeling.models import Judge, Pair, PairSource, Passage, Query, RelevanceDefinition, ScoringJob
from models_llm.ensembles import PROMPT_PRESETS


class GradeSerializer(serializers.Serializer):
    value = StrictIntegerField()
    name = StrictCharField()
    gain = StrictFloatField()


class ScaleSerializer(serializers.Serializer):
    grades = GradeSerializer(many=True)
    relevant_from = StrictIntegerField()


class ProjectCountsSerializer(serializers.Serializer):
    queries = StrictIntegerField()
    passages = StrictIntegerField()
    pairs = StrictIntegerField()
    labels = StrictIntegerField(help_text="Current labels (not superseded).")
    judgments = StrictIntegerField()


class ProjectSerializer(serializers.Serializer):
    """Renders a ProjectSummary (labeling.selectors.projects)."""

    slug = serializers.SlugField(source="project.slug")
    name = StrictCharField(source="project.name")
    description = StrictCharField(source="project.description")
    scale = ScaleSerializer(source="project.label_scale")
    counts = ProjectCountsSerializer()


class ProjectCreateSerializer(serializers.Serializer):
    """A new, empty project (staff): its data comes as a bundle (POST /api/projects/SLUG/bundles/)."""

    name = StrictCharField(max_length=200, help_text="unique whatever its case")
    slug = serializers.SlugField(max_length=64, help_text="its address: letters, digits, '-' and '_'")
    description = StrictCharField(required=False, allow_blank=True, default="")
    scale = ScaleSerializer(required=False, help_text="the label scale; the default one when left out")


class CurrentDefinitionSerializer(serializers.Serializer):
    version = StrictIntegerField()
    text = StrictCharField()


class QuerySerializer(serializers.ModelSerializer):
    """`disclosure` in the context is what the caller may see (labeling.selectors.disclosure): an expert does not
    get the metadata that tells which pair holds a reference grade."""

    current_definition = serializers.SerializerMethodField()

    class Meta:
        model = Query
        fields = ["external_id", "text", "metadata", "current_definition"]

    def to_representation(self, query: Query) -> dict:
        data = super().to_representation(query)
        data["metadata"] = self.context["disclosure"].metadata(data["metadata"])
        return data

    @extend_schema_field(CurrentDefinitionSerializer(allow_null=True))
    def get_current_definition(self, query: Query) -> dict | None:
        # The annotations come from selectors.projects.queries_with_current_definition.
        if query.current_definition_version is None:
            return None
        return {"version": query.current_definition_version, "text": query.current_definition_text}


class PassageSerializer(serializers.ModelSerializer):
    """`disclosure` in the context: as for QuerySerializer."""

    class Meta:
        model = Passage
        fields = ["external_id", "title", "text", "metadata"]

    def to_representation(self, passage: Passage) -> dict:
        data = super().to_representation(passage)
        data["metadata"] = self.context["disclosure"].metadata(data["metadata"])
        return data


class PairSourceSerializer(serializers.ModelSerializer):
    class Meta:
        model = PairSource
        fields = ["system", "rank"]


class PairSerializer(serializers.ModelSerializer):
    """`disclosure` in the context says whether the caller may see reference grades (labeling.selectors.disclosure):
    hidden, the grade is null and its source empty, as for a pair without one, and the sources that would tell it
    are left out."""

    query = StrictCharField(source="query.external_id", help_text="The query's external id.")
    passage = StrictCharField(source="passage.external_id", help_text="The passage's external id.")
    sources = PairSourceSerializer(many=True, help_text="Retrieval systems that put the pair in the pool.")

    class Meta:
        model = Pair
        fields = ["id", "query", "passage", "reference_grade", "reference_source", "sources"]

    def to_representation(self, pair: Pair) -> dict:
        data = super().to_representation(pair)
        disclosure = self.context["disclosure"]
        if not disclosure.reference_grade:
            data.update(reference_grade=None, reference_source="",
                        sources=PairSourceSerializer(disclosure.sources(pair.sources.all()), many=True).data)
        return data


class JudgeSerializer(serializers.Serializer):
    name = StrictCharField()
    backend = StrictCharField()
    model = StrictCharField()
    method = StrictCharField(allow_blank=True,
                             help_text="tok, ask, embedding, crossencoder or ensemble; empty for imports")
    endpoint = StrictCharField(allow_blank=True, help_text="openai: the operator's endpoint it uses")
    price_in = StrictFloatField(allow_null=True)
    price_out = StrictFloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    relevance_rule = StrictCharField(help_text="when its P makes a pair relevant: its qrels, export, Systems page "
                                               "and validation all binarise by this rule unless a threshold is given")


class JudgeCreateSerializer(serializers.Serializer):
    """A new judge. An openai judge names one of the endpoints the operator declared (LLM_ENDPOINTS): URLs and
    the variables holding API keys are never taken from a request."""

    refuses_unknown_fields = True  # validate() below; the schema says additionalProperties: false
    name = StrictCharField(max_length=200)
    backend = serializers.ChoiceField(choices=[backend.value for backend in Judge.Backend.creatable()])
    model = StrictCharField(max_length=300, required=False, allow_blank=True, default="")
    endpoint = StrictCharField(max_length=64, required=False)
    method = serializers.ChoiceField(choices=[method.value for method in Judge.Method.prompting()], required=False)
    cot = StrictBooleanField(required=False)
    use_definition = StrictBooleanField(required=False)
    adapter = StrictCharField(max_length=300, required=False)
    strategies = serializers.ListField(child=StrictCharField(max_length=32), required=False, max_length=8)
    prompts = serializers.ChoiceField(
        choices=list(PROMPT_PRESETS), required=False,
        help_text="ensemble method: paper (DisastIR App. C as printed, the default), released-code (the paper's "
                  "words, the released code's cot criteria after a No) or legacy (stored judges without the key)")
    members = serializers.ListField(child=StrictCharField(max_length=200), required=False, max_length=20)
    max_new_tokens = StrictIntegerField(min_value=1, max_value=4096, required=False)
    max_length = StrictIntegerField(min_value=16, max_value=8192, required=False,
                                    help_text="crossencoder: tokens of query and passage together (default 512)")
    separator = StrictCharField(max_length=32, required=False, trim_whitespace=False,
                                help_text="crossencoder: between the definition and the question (default ' [SEP] ')")
    price_in = StrictFloatField(min_value=0, max_value=10_000, required=False)
    price_out = StrictFloatField(min_value=0, max_value=10_000, required=False)
    template = serializers.DictField(child=StrictCharField(), required=False)

    def validate(self, attrs: dict) -> dict:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: ["not a judge field (an openai judge names an endpoint the operator declared)"]
                 for name in unknown}
            )
        return attrs


class ScoringJobCreateSerializer(serializers.Serializer):
    judge = StrictCharField()
    scope = serializers.ChoiceField(choices=ScoringJob.Scope.values, default=ScoringJob.Scope.MISSING.value)
    pair_ids = serializers.ListField(child=IdField(), required=False, allow_empty=False)
    priority = StrictIntegerField(min_value=1, max_value=10, default=1,
                                  help_text="the job's part of its project's share of the workers (1 to 10; above 1 "
                                            "staff only, else 403)")


class ScoringJobPrioritySerializer(serializers.Serializer):
    priority = StrictIntegerField(min_value=1, max_value=10,
                                  help_text="the job's part of its project's share of the workers (1 to 10; above 1 "
                                            "staff only, else 403)")


class ScoringJobSerializer(serializers.Serializer):
    id = StrictIntegerField(source="job.id")
    judge = StrictCharField(source="job.judge.name")
    scope = StrictCharField(source="job.scope")
    status = StrictCharField(source="job.status")
    total = StrictIntegerField(source="job.total")
    done = StrictIntegerField(source="job.done")
    failed = StrictIntegerField(source="job.failed")
    last_error = StrictCharField(source="error", help_text="the reason for project admins; others a generic text")
    state = serializers.ChoiceField(
        source="state.name", choices=["queued", "running", "stalled", "done", "failed", "cancelled"],
        help_text="queued: waiting its turn in the queue (`ahead` tasks before it); running: its chunks move; "
                  "stalled: a chunk a worker took has not moved for SCORING_STALL_SECONDS; or how it ended")
    ahead = StrictIntegerField(source="state.ahead", allow_null=True,
                               help_text="queued: tasks of other jobs before it in the queue; else null")
    priority = StrictIntegerField(source="job.priority",
                                  help_text="its part of its project's share of the workers (1 to 10)")
    stalled = StrictBooleanField(help_text="a chunk a worker took has not moved for SCORING_STALL_SECONDS")
    lost_calls = StrictIntegerField(help_text="pairs sent whose answer went with a lost worker (in calls)")
    created_at = serializers.DateTimeField(source="job.created_at")
    finished_at = serializers.DateTimeField(source="job.finished_at", allow_null=True)
    pairs_per_s = StrictFloatField(allow_null=True)
    eta_s = StrictFloatField(allow_null=True)
    calls = StrictIntegerField(help_text="model calls made so far (cached ensemble members not counted)")
    prompt_tokens = StrictIntegerField()
    completion_tokens = StrictIntegerField()
    cost_usd = StrictFloatField(allow_null=True, help_text="at the judge's prices; null without prices")


class DefinitionSerializer(serializers.Serializer):
    """One version of a query's relevance definition; `current_version` in the context marks the current one (the
    newest version that is not an LLM draft)."""

    version = StrictIntegerField()
    text = StrictCharField()
    author = StrictCharField(source="author.username", allow_null=True, default=None,
                             help_text="Null for definitions that came with an import.")
    created_at = serializers.DateTimeField()
    is_current = serializers.SerializerMethodField()
    is_draft = StrictBooleanField(help_text="An LLM draft: not current until an admin saves it as a new version.")
    origin = serializers.ChoiceField(choices=RelevanceDefinition.Origin.choices)
    drafted_by = StrictCharField(source="drafted_by.name", allow_null=True, default=None,
                                 help_text="The judge whose LLM wrote the text (or the draft it is based on).")

    def get_is_current(self, definition: RelevanceDefinition) -> bool:
        return definition.version == self.context["current_version"]


class DefinitionCreateSerializer(serializers.Serializer):
    # Blank and whitespace are passed on: the service's message says what is wrong, as in the browser.
    text = StrictCharField(allow_blank=True, trim_whitespace=False)
