from django.urls import path

from labeling.views import (
    adjudication,
    audit,
    browse,
    bundles,
    definitions,
    export,
    finetune,
    judges,
    members,
    projects,
    settings,
    systems,
    validation,
    workspace,
)

# <id:...> is a database id (labeling.ids.IdConverter, registered in labeling/apps.py).
app_name = "labeling"

urlpatterns = [
    path("", projects.project_list, name="project_list"),
    path("projects/", bundles.project_create_view, name="project_create"),
    path("projects/<slug:slug>/", projects.project_detail, name="project_detail"),
    path("projects/<slug:slug>/qrels/", export.qrels_export, name="qrels_export"),
    path("projects/<slug:slug>/annotate/", workspace.workspace, name="workspace"),
    path("projects/<slug:slug>/annotate/submit/", workspace.workspace_submit, name="workspace_submit"),
    path("projects/<slug:slug>/annotate/skip/", workspace.workspace_skip, name="workspace_skip"),
    path("projects/<slug:slug>/annotate/undo/", workspace.workspace_undo, name="workspace_undo"),
    path("projects/<slug:slug>/annotate/summary/", workspace.workspace_summary, name="workspace_summary"),
    path("projects/<slug:slug>/adjudication/", adjudication.adjudication_page, name="adjudication"),
    path(
        "projects/<slug:slug>/adjudication/<id:pair_id>/", adjudication.adjudication_set_view, name="adjudication_set"
    ),
    path("projects/<slug:slug>/members/", members.members_page, name="members"),
    path("projects/<slug:slug>/members/<id:user_id>/remove/", members.member_remove_view, name="member_remove"),
    path("projects/<slug:slug>/members/invitations/", members.invitation_create_view, name="invitation_create"),
    path(
        "projects/<slug:slug>/members/invitations/<id:invitation_id>/revoke/", members.invitation_revoke_view,
        name="invitation_revoke",
    ),
    path("invite/<str:token>/", members.invitation_accept_view, name="invitation_accept"),
    path("projects/<slug:slug>/settings/", settings.queue_settings_page, name="settings"),
    path("projects/<slug:slug>/settings/stopping/", settings.stopping_settings, name="settings_stopping"),
    path("projects/<slug:slug>/validation/", validation.validation_dashboard, name="validation"),
    path("projects/<slug:slug>/validation/refresh/", validation.validation_refresh, name="validation_refresh"),
    path("projects/<slug:slug>/judges/<path:judge>/calibrate/", validation.judge_calibrate_view, name="judge_calibrate"),
    path("projects/<slug:slug>/judges/", judges.judges_page, name="judges"),
    path("projects/<slug:slug>/judges/new/", judges.judge_create_view, name="judge_create"),
    path("projects/<slug:slug>/judges/<path:judge>/score/", judges.job_start_view, name="job_start"),
    path("projects/<slug:slug>/judges/<path:judge>/estimate/", judges.judge_estimate_view, name="judge_estimate"),
    path("projects/<slug:slug>/jobs/<id:job_id>/cancel/", judges.job_cancel_view, name="job_cancel"),
    path("projects/<slug:slug>/jobs/<id:job_id>/priority/", judges.job_priority_view, name="job_priority"),
    path("projects/<slug:slug>/judges/<path:judge>/robustness/", audit.judge_robustness, name="judge_robustness"),
    path("projects/<slug:slug>/judges/<path:judge>/robustness/audit/", audit.audit_start_view, name="audit_start"),
    path("projects/<slug:slug>/audits/<id:audit_id>/", audit.audit_detail, name="audit_detail"),
    path("projects/<slug:slug>/audits/<id:audit_id>/cancel/", audit.audit_cancel_view, name="audit_cancel"),
    path("projects/<slug:slug>/bundles/", bundles.bundles_page, name="bundles"),
    path("projects/<slug:slug>/bundles/upload/", bundles.bundle_upload_view, name="bundle_upload"),
    path("projects/<slug:slug>/bundles/<id:bundle_job_id>/cancel/", bundles.bundle_cancel_view, name="bundle_cancel"),
    path("projects/<slug:slug>/systems/", systems.systems_page, name="systems"),
    path("projects/<slug:slug>/systems/runs/upload/", systems.run_upload_view, name="run_upload"),
    path("projects/<slug:slug>/systems/runs/<id:run_id>/delete/", systems.run_delete_view, name="run_delete"),
    path("projects/<slug:slug>/systems/runs/<id:run_id>/robustness/", audit.run_robustness, name="run_robustness"),
    path("projects/<slug:slug>/systems/retrieval/", systems.retrieval_start_view, name="retrieval_start"),
    path(
        "projects/<slug:slug>/systems/retrieval/<id:retrieval_job_id>/cancel/", systems.retrieval_cancel_view,
        name="retrieval_cancel",
    ),
    path("projects/<slug:slug>/systems/pool/preview/", systems.pool_preview_view, name="pool_preview"),
    path("projects/<slug:slug>/systems/pool/", systems.pool_add_view, name="pool_add"),
    path("projects/<slug:slug>/finetune/", finetune.finetune_page, name="finetune"),
    path(
        "projects/<slug:slug>/finetune/training-sets/sample/", finetune.training_set_sample_view,
        name="training_set_sample",
    ),
    path(
        "projects/<slug:slug>/finetune/training-sets/import/", finetune.training_set_import_view,
        name="training_set_import",
    ),
    path(
        "projects/<slug:slug>/finetune/training-sets/<path:training_set>/delete/", finetune.training_set_delete_view,
        name="training_set_delete",
    ),
    path(
        "projects/<slug:slug>/finetune/training-sets/<path:training_set>/score/", finetune.training_set_score_view,
        name="training_set_score",
    ),
    path("projects/<slug:slug>/finetune/jobs/", finetune.finetune_start_view, name="finetune_start"),
    path(
        "projects/<slug:slug>/finetune/jobs/<id:finetune_job_id>/cancel/", finetune.finetune_cancel_view,
        name="finetune_cancel",
    ),
    path(
        "projects/<slug:slug>/finetune/jobs/<id:finetune_job_id>/resume/", finetune.finetune_resume_view,
        name="finetune_resume",
    ),
    path(
        "projects/<slug:slug>/finetune/jobs/<id:finetune_job_id>/score-pool/", finetune.finetune_score_pool_view,
        name="finetune_score_pool",
    ),
    path("projects/<slug:slug>/queries/", browse.browse_queries, name="browse_queries"),
    path("projects/<slug:slug>/queries/<id:query_id>/pairs/", browse.browse_query, name="browse_query"),
    path("projects/<slug:slug>/pairs/<id:pair_id>/", browse.browse_pair, name="browse_pair"),
    path("projects/<slug:slug>/definitions/", definitions.definitions_list, name="definitions"),
    path("projects/<slug:slug>/queries/<id:query_id>/definition/", definitions.definition_page, name="definition"),
    path(
        "projects/<slug:slug>/queries/<id:query_id>/definition/draft/", definitions.definition_draft_view,
        name="definition_draft",
    ),
    path(
        "projects/<slug:slug>/queries/<id:query_id>/definition/rescore/<path:judge>/",
        definitions.stale_rescore_view,
        name="definition_rescore",
    ),
]
