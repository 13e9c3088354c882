"""Django admin for every labeling table. Pairs, passages, queries, labels and judgments can number in the
millions, so foreign keys to them are raw-id widgets (no <select> of a million options), list filters only
offer small choice sets (projects, judges, enum fields), and the big changelists skip the full count."""
from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from labeling.models import (
    Judge,
    JudgeCalibration,
    Judgment,
    Label,
    Membership,
    Pair,
    PairSource,
    Passage,
    Project,
    Query,
    RelevanceDefinition,
    ScoringChunk,
    ScoringJob,
    ValidationResult,
)


class BigTableAdmin(admin.ModelAdmin):
    """For tables that grow to millions of rows: no second COUNT over the whole table on a filtered page,
    and no per-option counts in the filter sidebar (each would be another scan)."""

    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER


class CurrentLabelFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("current", "current"), ("superseded", "superseded")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Label]) -> QuerySet[Label]:
        if self.value() == "current":
            return queryset.filter(superseded_at__isnull=True)
        if self.value() == "superseded":
            return queryset.filter(superseded_at__isnull=False)
        return queryset


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["created_at"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "user__email", "project__slug", "project__name"]
    autocomplete_fields = ["user", "project"]
    list_select_related = ["user", "project"]


class RelevanceDefinitionInline(admin.StackedInline):
    model = RelevanceDefinition
    extra = 0
    fields = ["version", "text", "author", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["author"]


@admin.register(Query)
class QueryAdmin(BigTableAdmin):
    list_display = ["external_id", "project", "text"]
    list_filter = ["project"]
    search_fields = ["external_id", "text"]
    list_select_related = ["project"]
    inlines = [RelevanceDefinitionInline]


@admin.register(RelevanceDefinition)
class RelevanceDefinitionAdmin(admin.ModelAdmin):
    list_display = ["query", "version", "author", "created_at"]
    list_filter = ["query__project"]
    search_fields = ["query__external_id", "text"]
    raw_id_fields = ["query"]
    autocomplete_fields = ["author"]
    list_select_related = ["query", "author"]
    readonly_fields = ["created_at"]


@admin.register(Passage)
class PassageAdmin(BigTableAdmin):
    list_display = ["external_id", "project", "title"]
    list_filter = ["project"]
    # Ids only: a substring search through millions of passage texts would scan the table on every search.
    search_fields = ["external_id"]
    list_select_related = ["project"]


class PairSourceInline(admin.TabularInline):
    model = PairSource
    extra = 0


@admin.register(Pair)
class PairAdmin(BigTableAdmin):
    list_display = ["id", "project", "query", "passage", "reference_grade", "reference_source"]
    list_filter = ["project"]
    search_fields = ["=query__external_id", "=passage__external_id"]
    raw_id_fields = ["query", "passage"]
    list_select_related = ["project", "query", "passage"]
    inlines = [PairSourceInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Pair]:
        # The changelist shows external ids only; leave the texts in the database.
        return super().get_queryset(request).defer("query__text", "passage__text", "passage__title")


@admin.register(PairSource)
class PairSourceAdmin(BigTableAdmin):
    list_display = ["pair", "system", "rank"]
    list_select_related = ["pair"]
    list_filter = ["pair__project"]
    search_fields = ["=system"]
    raw_id_fields = ["pair"]


@admin.register(Label)
class LabelAdmin(BigTableAdmin):
    list_display = ["id", "pair", "annotator", "grade", "role", "definition", "created_at", "superseded_at"]
    list_filter = [CurrentLabelFilter, "role", "pair__project"]
    search_fields = ["=annotator__username", "=pair__query__external_id"]
    raw_id_fields = ["pair", "definition"]
    autocomplete_fields = ["annotator"]
    list_select_related = ["pair", "annotator", "definition__query"]
    # Newest first, and ordering by the primary key keeps the page query on an index.
    ordering = ["-id"]


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "backend", "model", "calibration", "created_at"]
    list_filter = ["project", "backend"]
    search_fields = ["name", "model"]
    list_select_related = ["project"]
    readonly_fields = ["created_at"]


@admin.register(Judgment)
class JudgmentAdmin(BigTableAdmin):
    list_display = ["id", "pair", "judge", "definition", "status", "p_relevant", "guess", "created_at"]
    list_filter = ["status", "judge", "pair__project"]
    search_fields = ["=pair__query__external_id", "=pair__passage__external_id"]
    raw_id_fields = ["pair", "definition"]
    list_select_related = ["pair", "judge", "definition__query"]
    ordering = ["-id"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the services write (a fit, a cached report): shown, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(JudgeCalibration)
class JudgeCalibrationAdmin(ReadOnlyAdmin):
    list_display = ["judge", "method", "n", "n_relevant", "created_at", "created_by"]
    list_filter = ["method", "judge__project"]
    search_fields = ["judge__name"]
    list_select_related = ["judge", "created_by"]
    # fitted_on holds one entry per gold pair (a million at scale): not rendered on the page.
    exclude = ["fitted_on"]


# The columns every kind of background job has (labeling/models/jobs.py), after the kind's own.
JOB_COLUMNS = ["status", "attempts", "requested_by", "created_at", "started_at", "finished_at"]


@admin.register(ValidationResult)
class ValidationResultAdmin(ReadOnlyAdmin):
    list_display = ["project", "computed_at", "requested_at", "is_stale", *JOB_COLUMNS]
    list_filter = ["status"]
    list_select_related = ["project", "requested_by"]
    exclude = ["data"]

    @admin.display(boolean=True, description="stale")
    def is_stale(self, obj: ValidationResult) -> bool:
        return obj.is_stale


@admin.register(ScoringJob)
class ScoringJobAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "judge", "scope", "done", "failed", "total", *JOB_COLUMNS]
    list_filter = ["status", "scope", "project"]
    search_fields = ["judge__name"]
    list_select_related = ["project", "judge", "requested_by"]


@admin.register(ScoringChunk)
class ScoringChunkAdmin(ReadOnlyAdmin):
    list_display = ["id", "job", "query", "size", "attempts", "failed", "finished_at"]
    list_filter = ["failed"]
    raw_id_fields = ["job", "query"]
    list_select_related = ["job", "query"]
    show_full_result_count = False
