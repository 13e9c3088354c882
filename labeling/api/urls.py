from django.urls import path, re_path

from labeling.api import audit, bundles, exceptions, export, finetune, labels, runs, systems, tokens, views

# <id:...> is a database id (labeling.ids.IdConverter, registered in labeling/apps.py).
app_name = "api"

urlpatterns = [
    path("token/", tokens.TokenObtainView.as_view(), name="token"),
    path("schema/", exceptions.SchemaView.as_view(), name="schema"),
    path("projects/", views.ProjectListView.as_view(), name="project-list"),
    path("projects/<slug:slug>/", views.ProjectDetailView.as_view(), name="project-detail"),
    path("projects/<slug:slug>/queries/", views.QueryListView.as_view(), name="query-list"),
    path("projects/<slug:slug>/passages/", views.PassageListView.as_view(), name="passage-list"),
    path("projects/<slug:slug>/pairs/", views.PairListView.as_view(), name="pair-list"),
    path("projects/<slug:slug>/queue/next/", labels.QueueNextView.as_view(), name="queue-next"),
    path("projects/<slug:slug>/queue/skip/", labels.QueueSkipView.as_view(), name="queue-skip"),
    path("projects/<slug:slug>/labels/", labels.LabelListView.as_view(), name="label-list"),
    path("projects/<slug:slug>/labels/undo/", labels.LabelUndoView.as_view(), name="label-undo"),
    path("projects/<slug:slug>/validation/", views.ValidationView.as_view(), name="validation"),
    path("projects/<slug:slug>/qrels/", export.QrelsView.as_view(), name="qrels"),
    path(
        "projects/<slug:slug>/judges/<path:judge>/metrics-by-definition/",
        views.JudgeMetricsByDefinitionView.as_view(),
        name="judge-metrics-by-definition",
    ),
    path("projects/<slug:slug>/judges/<path:judge>/audits/", audit.AuditListView.as_view(), name="audit-list"),
    path("projects/<slug:slug>/audits/<id:audit_id>/", audit.AuditDetailView.as_view(), name="audit-detail"),
    path("projects/<slug:slug>/judges/", views.JudgeListView.as_view(), name="judge-list"),
    path("projects/<slug:slug>/jobs/", views.ScoringJobListView.as_view(), name="job-list"),
    path("projects/<slug:slug>/jobs/<id:job_id>/", views.ScoringJobDetailView.as_view(), name="job-detail"),
    path("projects/<slug:slug>/systems/evaluation/", systems.SystemsEvaluationView.as_view(),
         name="systems-evaluation"),
    path("projects/<slug:slug>/bundles/", bundles.BundleListView.as_view(), name="bundle-list"),
    path("projects/<slug:slug>/bundles/<id:bundle_job_id>/", bundles.BundleDetailView.as_view(),
         name="bundle-detail"),
    path("projects/<slug:slug>/runs/", runs.RunListView.as_view(), name="run-list"),
    path("projects/<slug:slug>/runs/<id:run_id>/", runs.RunDetailView.as_view(), name="run-detail"),
    path("projects/<slug:slug>/runs/<id:run_id>/multicondition/", audit.RunMulticonditionView.as_view(),
         name="run-multicondition"),
    path("projects/<slug:slug>/retrieval/", runs.RetrievalJobListView.as_view(), name="retrieval-list"),
    path("projects/<slug:slug>/pool/", runs.PoolView.as_view(), name="pool"),
    path("projects/<slug:slug>/training-sets/", finetune.TrainingSetListView.as_view(), name="training-set-list"),
    path("projects/<slug:slug>/training-sets/import/", finetune.TrainingSetImportView.as_view(),
         name="training-set-import"),
    path("projects/<slug:slug>/training-sets/<path:training_set>/export.jsonl",
         finetune.TrainingSetExportView.as_view(), name="training-set-export"),
    path("projects/<slug:slug>/training-sets/<path:training_set>/score/", finetune.TrainingSetScoreView.as_view(),
         name="training-set-score"),
    path("projects/<slug:slug>/training-sets/<path:training_set>/", finetune.TrainingSetDetailView.as_view(),
         name="training-set-detail"),
    path("projects/<slug:slug>/finetune/", finetune.FineTuneJobListView.as_view(), name="finetune-list"),
    path("projects/<slug:slug>/finetune/<id:finetune_job_id>/", finetune.FineTuneJobDetailView.as_view(),
         name="finetune-detail"),
    path("projects/<slug:slug>/finetune/<id:finetune_job_id>/cancel/", finetune.FineTuneCancelView.as_view(),
         name="finetune-cancel"),
    path("projects/<slug:slug>/finetune/<id:finetune_job_id>/resume/", finetune.FineTuneResumeView.as_view(),
         name="finetune-resume"),
    path("projects/<slug:slug>/finetune/<id:finetune_job_id>/score-pool/", finetune.FineTuneScorePoolView.as_view(),
         name="finetune-score-pool"),
    path(
        "projects/<slug:slug>/queries/<path:query_external_id>/definitions/",
        views.DefinitionListView.as_view(),
        name="definition-list",
    ),
    # Last: any other path under /api/ is the API's 404 body, not an HTML page (unnamed: no endpoint of its own).
    re_path(r"^(?P<rest>[\s\S]*)\Z", exceptions.unknown_path),  # [\s\S]: a path may hold a newline
]
