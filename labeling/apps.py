from django.apps import AppConfig
from django.urls import register_converter

from labeling.ids import IdConverter


class LabelingConfig(AppConfig):
    name = "labeling"
    verbose_name = "Labeling"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # `<id:...>` in labeling/urls.py and labeling/api/urls.py: ids past the bigint range are 404 by routing.
        register_converter(IdConverter, "id")
