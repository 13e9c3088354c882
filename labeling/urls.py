from django.urls import path

from labeling.views import projects as views

app_name = "labeling"

urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
    path("projects/<slug:slug>/validation/", views.validation_dashboard, name="validation"),
    path("projects/<slug:slug>/validation/refresh/", views.validation_refresh, name="validation_refresh"),
    path("projects/<slug:slug>/judges/<path:judge>/calibrate/", views.judge_calibrate_view, name="judge_calibrate"),
    path("projects/<slug:slug>/judges/", views.judges_page, name="judges"),
    path("projects/<slug:slug>/judges/new/", views.judge_create_view, name="judge_create"),
    path("projects/<slug:slug>/judges/<path:judge>/score/", views.job_start_view, name="job_start"),
    path("projects/<slug:slug>/jobs/<int:job_id>/cancel/", views.job_cancel_view, name="job_cancel"),
]
