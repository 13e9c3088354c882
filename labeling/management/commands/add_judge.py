"""`manage.py add_judge NAME --project SLUG --backend hf|openai|embedding|crossencoder|ensemble --model ...`: define
a judge."""
import argparse
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.models import Judge
from labeling.services.judges import JudgeError, judge_create
from models_llm.ensembles import PROMPT_PRESETS


class Command(BaseCommand):
    help = ("Create a judge in a project: an LLM (DIRAS Tok or Ask prompting), the embedding baseline, a "
            "cross-encoder (a re-ranker folder) or an ensemble of judges.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--backend", required=True,
                            choices=[backend.value for backend in Judge.Backend.creatable()],
                            help="ensemble: a judge whose P is the mean of --members' P")
        parser.add_argument("--model", default="",
                            help="local model folder (hf, embedding, crossencoder) or model name (openai)")
        parser.add_argument("--members", help="ensemble backend: member judge names, comma-separated")
        parser.add_argument("--strategies", help="ensemble method: direct,cot,multi (default: all the intent uses)")
        parser.add_argument("--prompts", choices=list(PROMPT_PRESETS),
                            help="ensemble method: paper (DisastIR App. C as printed, the default), released-code (the "
                                 "paper's words, the released code's cot criteria after a No) or legacy (this "
                                 "product's first prompts); see docs/ensembles.md")
        parser.add_argument("--max-new-tokens", type=int, help="answer budget in tokens (ask, ensemble)")
        parser.add_argument("--price-in", type=float, help="USD per million prompt tokens, for cost figures")
        parser.add_argument("--price-out", type=float, help="USD per million completion tokens")
        parser.add_argument("--adapter", help="peft LoRA adapter folder (hf)")
        parser.add_argument("--method", choices=[method.value for method in Judge.Method.prompting()],
                            help="tok: P from next-token logits (default); ask: parse the stated confidence; "
                                 "ensemble: DisastIR prompt strategies")
        parser.add_argument("--cot", action="store_true", help="ask for a [Reason] before the guess")
        parser.add_argument("--no-definition", action="store_true", help="leave the relevance definition out of the prompt")
        parser.add_argument("--device", help="hf: cpu, cuda, cuda:1 ...")
        parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], help="hf weights dtype")
        parser.add_argument("--batch-size", type=int, help="hf: paragraphs per forward pass; crossencoder: pairs")
        parser.add_argument("--max-length", type=int,
                            help="crossencoder: tokens of query and passage together (default 512)")
        parser.add_argument("--separator", help="crossencoder: between the definition and the question "
                                                "(default ' [SEP] ')")
        parser.add_argument("--endpoint", help="openai: the name of an endpoint the operator declared in LLM_ENDPOINTS")
        # Gone: the operator declares URLs and key variables (LLM_ENDPOINTS); kept only to say so.
        parser.add_argument("--base-url", help=argparse.SUPPRESS)
        parser.add_argument("--api-key-env", help=argparse.SUPPRESS)
        parser.add_argument("--concurrency", type=int, help="openai: requests in flight at most")
        parser.add_argument("--template", type=Path, help="JSON file of prompt template blocks to override")

    def handle(self, *args, name: str, project: str, template: Path | None, **options) -> None:
        if options["base_url"] or options["api_key_env"]:
            raise CommandError("--base-url and --api-key-env are not accepted: the operator declares endpoints in "
                               "LLM_ENDPOINTS and a judge names one with --endpoint")
        found = command_project(project)
        blocks = None
        if template is not None:
            try:
                blocks = json.loads(template.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise CommandError(f"{template}: {exc}") from None
        method = options["method"] or Judge.Method.default_for(options["backend"])
        prices = {"price_in": options["price_in"], "price_out": options["price_out"]}
        try:
            if options["backend"] == Judge.Backend.ENSEMBLE:
                members = [name.strip() for name in (options["members"] or "").split(",") if name.strip()]
                judge = judge_create(project=found, name=name, backend=Judge.Backend.ENSEMBLE, members=members,
                                     **prices)
                self.stdout.write(self.style.SUCCESS(
                    f"Created judge {judge.name!r} (mean P of {', '.join(members)}) in {project!r}."
                ))
                return
            strategies = [s.strip() for s in options["strategies"].split(",")] if options["strategies"] else None
            judge = judge_create(
                project=found, name=name, backend=options["backend"], model=options["model"], template=blocks,
                method=method, cot=options["cot"] or None, use_definition=False if options["no_definition"] else None,
                adapter=options["adapter"], device=options["device"], dtype=options["dtype"],
                batch_size=options["batch_size"], endpoint=options["endpoint"],
                concurrency=options["concurrency"], strategies=strategies, prompts=options["prompts"], max_new_tokens=options["max_new_tokens"],
                max_length=options["max_length"], separator=options["separator"], **prices,
            )
        except JudgeError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Created judge {judge.name!r} ({judge.backend}, {method}) in {project!r}."))
