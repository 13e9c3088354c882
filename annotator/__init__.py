"""The annotator Django project; the Celery app is loaded with Django so tasks can be sent."""
from annotator.celery import app as celery_app

__all__ = ("celery_app",)
