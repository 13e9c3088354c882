from django.urls import path

from labeling import views

app_name = "labeling"

urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
    path("projects/<slug:slug>/validation/", views.validation_dashboard, name="validation"),
    path("projects/<slug:slug>/validation/refresh/", views.validation_refresh, name="validation_refresh"),
    path("projects/<slug:slug>/judges/<str:judge>/calibrate/", views.judge_calibrate_view, name="judge_calibrate"),
]
