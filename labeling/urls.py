from django.urls import path

from labeling import views

app_name = "labeling"

urlpatterns = [
    path("", views.project_list, name="project_list"),
    path("projects/<slug:slug>/", views.project_detail, name="project_detail"),
]
