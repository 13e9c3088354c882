"""`manage.py pool --project SLUG --runs A,B --depth K [--dry-run] [--judge NAME]`: pool the top k of runs;
`--runs A --sample [--sample-top T] [--sample-inside N] [--sample-outside M] [--seed S]`: DIRAS's sample of one run
(N drawn from within its top T per query, M from outside it)."""
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_judge, command_project
from labeling.models import Project, Run
from labeling.selectors.finetune_diras_sample import DIRAS_INSIDE, DIRAS_OUTSIDE, DIRAS_TOP
from labeling.selectors.runs import run_by_name
from labeling.services.pooling import PoolPreview, pool_add, pool_preview, pool_sample, random_system

SHOWN_QUERIES = 20


class Command(BaseCommand):
    help = (
        "Add pairs to the project's pool from its runs. With --depth K: the union of each run's top K per query, "
        "a preview printed first (new pairs per query, sources; with --judge, what judging the new pairs would "
        "cost), then written unless --dry-run. With --sample and one run: DIRAS's sampling for distillation, per "
        "query N passages drawn at random from within the run's top T (each report's top T when the passages name "
        "their report) and M drawn at random from the corpus outside that top, seeded (DIRAS: T 5, N 30, M 30); the "
        "inside ones are recorded with the run's name and rank, the outside ones as system 'random:S' without a "
        "rank. A query with fewer than asked on a side gives all it has and is counted. Pairs already in the pool "
        "only gain sources; running the same again writes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--runs", required=True, help="run names, comma-separated")
        parser.add_argument("--depth", type=int, help="pool each run's top K per query")
        parser.add_argument("--dry-run", action="store_true", help="with --depth: print the preview only")
        parser.add_argument("--judge", help="with --depth: estimate what judging the new pairs would cost")
        parser.add_argument("--sample", action="store_true", help="DIRAS sampling of one run")
        parser.add_argument("--sample-top", type=int,
                            help=f"DIRAS sampling: the top T per query (default {DIRAS_TOP})")
        parser.add_argument("--sample-inside", type=int,
                            help=f"DIRAS sampling: N passages per query drawn within the top (default {DIRAS_INSIDE})")
        parser.add_argument("--sample-outside", type=int,
                            help=f"DIRAS sampling: M passages per query drawn outside it (default {DIRAS_OUTSIDE})")
        parser.add_argument("--seed", type=int, default=0, help="DIRAS sampling: the random draw's seed (default 0)")

    def handle(self, *args, project: str, runs: str, depth: int | None, dry_run: bool, judge: str | None,
               sample: bool, sample_top: int | None, sample_inside: int | None, sample_outside: int | None,
               seed: int, **options) -> None:
        found = command_project(project)
        chosen = [self._run(found, name.strip()) for name in runs.split(",") if name.strip()]
        sampling = sample
        if sampling == (depth is not None):
            raise CommandError("give either --depth K, or --sample (DIRAS sampling)")
        if not sampling and any(size is not None for size in (sample_top, sample_inside, sample_outside)):
            raise CommandError("--sample-top, --sample-inside and --sample-outside go with --sample")
        sample_top = DIRAS_TOP if sample_top is None else sample_top
        sample_inside = DIRAS_INSIDE if sample_inside is None else sample_inside
        sample_outside = DIRAS_OUTSIDE if sample_outside is None else sample_outside
        try:
            if sampling:
                if dry_run or judge:
                    raise CommandError("--dry-run and --judge go with --depth")
                if len(chosen) != 1:
                    raise CommandError("DIRAS sampling takes one run")
                written = pool_sample(project=found, run=chosen[0], top=sample_top, inside=sample_inside,
                                      outside=sample_outside, seed=seed)
                short = written["short queries"]
                how = (f"sample of {chosen[0].name!r}: {written['inside']:,} drawn inside its top {sample_top} "
                       f"(asked {sample_inside} per query), {written['outside']:,} outside it as "
                       f"{random_system(seed)!r} (asked {sample_outside})"
                       + (f", {short:,} quer{'y' if short == 1 else 'ies'} with fewer than asked (all taken)"
                          if short else ""))
            else:
                item = command_judge(found, judge) if judge else None
                self._print(pool_preview(project=found, runs=chosen, depth=depth, judge=item), chosen, depth)
                if dry_run:
                    return
                written = pool_add(project=found, runs=chosen, depth=depth)
                how = f"top {depth} of {', '.join(run.name for run in chosen)}"
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"Pooled the {how}: {written['pairs']:,} new pair(s), {written['pool sources']:,} new source(s)."
        ))

    def _run(self, project: Project, name: str) -> Run:
        try:
            return run_by_name(project=project, name=name)
        except DomainError as exc:
            raise CommandError(str(exc)) from None

    def _print(self, preview: PoolPreview, runs: list[Run], depth: int) -> None:
        names = ", ".join(run.name for run in runs)
        self.stdout.write(
            f"Top {depth} of {names}: {preview.new_pairs:,} new pair(s) over {len(preview.per_query):,} queries, "
            f"{preview.existing:,} already in the pool, {preview.sources:,} source(s) to record."
        )
        for row in preview.per_query[:SHOWN_QUERIES]:
            self.stdout.write(f"  {row.query}: {row.new:,} new, {row.existing:,} in the pool")
        if len(preview.per_query) > SHOWN_QUERIES:
            self.stdout.write(f"  ... and {len(preview.per_query) - SHOWN_QUERIES:,} more queries")
        if preview.cost is not None:
            t = preview.cost.tokens
            self.stdout.write(
                f"Judging the new pairs with {preview.cost.judge.name!r}: about {t.calls:,} model calls, "
                f"{t.prompt_tokens:,} prompt + {t.completion_tokens:,} completion tokens"
                + (f", ${preview.cost.cost_usd:,.2f} at the judge's prices." if preview.cost.cost_usd is not None
                   else " (no prices on this judge).")
            )
