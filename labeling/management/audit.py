"""What the two audit commands (audit_judge, audit_multicondition) say the same way: the dry run's line and the wait
for a queued audit, with its progress on stderr."""
from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from labeling.durations import duration_text
from labeling.models import AuditJob
from labeling.services.audit import AuditEstimate


def estimate_text(estimate: AuditEstimate) -> str:
    """The estimate's probes, model calls, tokens and cost, after the caller's opening words."""
    line = (f"{estimate.probes:,} probe(s), {estimate.sampled_probes:,} of them sampled; built in "
            f"{duration_text(estimate.build_seconds)}.")
    if estimate.wall_s is not None:
        line += f" Time on one worker process: about {duration_text(estimate.wall_s)} ({estimate.speed})."
    if estimate.tokens is None:
        return line + " An embedding judge: no prompt, no token."
    t = estimate.tokens
    how = "counted with the model's tokenizer" if t.exact_prompt_tokens else "guessed from characters"
    line += (f" About {t.calls:,} model call(s), {t.prompt_tokens:,} prompt + {t.completion_tokens:,} completion "
             f"tokens ({how} on {t.sampled} probe(s)).")
    if estimate.cost_usd is None:
        return line + " No prices on this judge: no cost figure."
    return line + f" Estimated cost at the judge's prices: ${estimate.cost_usd:,.4f}."


def audit_wait(command: BaseCommand, job: AuditJob) -> dict:
    """Wait for the workers to finish `job`, showing progress on stderr; its report, or CommandError when it
    failed or was cancelled."""
    while True:
        job.refresh_from_db()
        command.stderr.write(f"\r{job.done:,}/{job.total:,} probes scored ({job.status})   ", ending="")
        command.stderr.flush()
        if job.finished_at is not None:
            command.stderr.write("")
            break
        time.sleep(1)
    if job.status != AuditJob.Status.DONE:
        raise CommandError(f"audit {job.id} {job.status}{': ' + job.error if job.error else ''}")
    return job.report
