"""`{{ job|job_state }}`: where any job honestly stands, "queued (3 ahead)", "running", "stalled" or how it ended
(labeling/selectors/job_states.py), for the pages that list jobs."""
from __future__ import annotations

from django import template

from labeling.selectors.job_states import job_state as state_of

register = template.Library()


@register.filter
def job_state(job) -> str:
    return state_of(job).text
