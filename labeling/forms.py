"""HTML forms: parse and check what a page posts before a service sees it."""
from __future__ import annotations

import json
from typing import ClassVar

from django import forms
from django.conf import settings
from django.db.models import QuerySet

from labeling.models import FineTuneJob, Judge, Project, RunKind
from labeling.models.project import QUEUE_STRATEGIES
from labeling.names import NameRefused
from labeling.scale import DEFAULT_SCALE, LabelScale
from labeling.selectors.finetune import STUDENT_NAME_MAX_LENGTH
from labeling.selectors.finetune_diras_sample import DIRAS_INSIDE, DIRAS_OUTSIDE, DIRAS_TOP
from labeling.selectors.query_sets import MAX_SET_CHARS, query_set_name
from labeling.selectors.queue_settings import queue_mix_percentages
from labeling.services.finetune_training_sets import MAX_HELD_OUT
from labeling.services.projects import LABELS_PER_ITEM_MAX, LEASE_MINUTES_MAX
from labeling.services.retrieval import DEFAULT_DEPTH, DEFAULT_FIRST_DEPTH, DEFAULT_KEEP, MAX_DEPTH
from labeling.services.retrieval_crisis import DEFAULTS as CRISIS_DEFAULTS
from labeling.services.retrieval_crisis import PRESET as CRISIS_PRESET
from models_llm.audit.multicondition import PAPER_FILLER
from models_llm.audit.types import PAD_WORDS, PERTURBATION_TESTS
from models_llm.ensembles import PROMPT_PRESETS, STRATEGIES
from models_llm.prompts import PRESETS
from models_llm.query_generation import INTENTS as GENERATION_INTENTS


class JudgeForm(forms.Form):
    name = forms.CharField(max_length=200)
    backend = forms.ChoiceField(choices=[(backend.value, backend.label) for backend in Judge.Backend.creatable()])
    model = forms.CharField(max_length=300, required=False,
                            help_text="a model folder (hf, embedding, crossencoder: a re-ranker) or a model name "
                                      "(openai); none for an ensemble")
    # A blank first choice: a select always posts one, and an embedding or crossencoder judge refuses a prompting
    # method.
    method = forms.ChoiceField(choices=[("", "(default: Tok; none for an embedding or crossencoder judge)")]
                               + [(method.value, method.label) for method in Judge.Method.prompting()],
                               required=False)
    strategies = forms.MultipleChoiceField(
        choices=[(name, name) for name in STRATEGIES], required=False, widget=forms.CheckboxSelectMultiple,
        help_text="ensemble method: the prompt strategies (none ticked: all the query's intent uses)",
    )
    prompts = forms.ChoiceField(
        choices=[("", "(default: paper)")] + [(name, name) for name in PROMPT_PRESETS], required=False,
        label="Ensemble prompts",
        help_text="ensemble method: paper (DisastIR App. C as printed), released-code (the paper's words, the "
                  "released code's cot criteria after a No) or legacy (this product's first prompts)",
    )
    members = forms.CharField(max_length=2000, required=False,
                              help_text="ensemble backend: member judge names, separated by commas")
    max_new_tokens = forms.IntegerField(min_value=1, max_value=4096, required=False,
                                        help_text="answer budget in tokens (Ask and ensembles)")
    max_length = forms.IntegerField(min_value=16, max_value=8192, required=False, label="Max length",
                                    help_text="crossencoder: tokens of query and passage together (default 512)")
    price_in = forms.FloatField(min_value=0, required=False, label="Price in",
                                help_text="USD per million prompt tokens (for cost figures)")
    price_out = forms.FloatField(min_value=0, required=False, label="Price out",
                                 help_text="USD per million completion tokens")
    cot = forms.BooleanField(required=False, label="Ask for a reason first (CoT)")
    no_definition = forms.BooleanField(required=False, label="Leave the relevance definition out")
    adapter = forms.CharField(max_length=300, required=False, help_text="peft LoRA adapter folder (hf)")
    endpoint = forms.ChoiceField(choices=[], required=False,
                                 help_text="openai: one of the endpoints the operator declared (LLM_ENDPOINTS)")
    preset = forms.ChoiceField(
        choices=[("", "(none)")] + [(preset.name, preset.label) for preset in PRESETS.values()], required=False,
        label="Prompt preset", help_text="start from a published prompt; no template copied or written below",
    )
    copy_template_from = forms.ModelChoiceField(queryset=Judge.objects.none(), required=False,
                                                help_text="start from another judge's prompt template")
    template = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False,
                               help_text="JSON prompt template blocks overriding the default (optional)")

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["copy_template_from"].queryset = Judge.objects.filter(project=project).order_by("name")
        self.fields["endpoint"].choices = [("", "(none)")] + [(name, name) for name in sorted(settings.LLM_ENDPOINTS)]

    def clean_template(self) -> dict | None:
        text = self.cleaned_data["template"].strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("a JSON object of template blocks")
        return value

    def clean(self) -> dict:
        data = super().clean()
        given = [bool(data.get("preset")), data.get("template") is not None, data.get("copy_template_from") is not None]
        if sum(given) > 1:
            raise forms.ValidationError("choose one of a preset, a judge to copy the template from, or a template")
        return data

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        template = data["template"]
        source = data["copy_template_from"]
        if template is None and source is not None and source.prompt.strip():
            template = json.loads(source.prompt)
        preset = PRESETS.get(data["preset"])
        if preset is not None:
            template = preset.template
        backend = data["backend"]
        prices = {"price_in": data["price_in"], "price_out": data["price_out"]}
        if backend == Judge.Backend.ENSEMBLE:
            members = [name.strip() for name in data["members"].split(",") if name.strip()]
            return {"name": data["name"], "backend": backend, "members": members, **prices}
        return {
            **prices,
            "strategies": data["strategies"] or None,
            "prompts": data["prompts"] or None,
            "max_new_tokens": data["max_new_tokens"],
            "max_length": data["max_length"],
            "name": data["name"],
            "backend": backend,
            "model": data["model"],
            "template": template,
            # None chosen: the backend's own (judge_create refuses a prompting method for an embedding judge).
            "method": data["method"] or Judge.Method.default_for(backend),
            "cot": data["cot"] or None,
            "use_definition": False if data["no_definition"] or (preset and not preset.use_definition) else None,
            "adapter": data["adapter"] or None,
            "endpoint": data["endpoint"] or None,
        }


QUEUE_STRATEGY_HELP = {
    "uncertain": "pairs whose P from the queue judge is closest to 0.5",
    "disagreement": "pairs with the largest spread of P across judges",
    "conflict": "pairs where a label contradicts the queue judge (a review by another expert)",
    "random": "a uniform sample of the pool: the unbiased validation sample",
    "stratified": "equal numbers of pairs per decile of the queue judge's P",
    "sequential": "the pool query by query, in import order",
}


def _percent(share: float) -> float | int:
    # 0.2 shows as "20", not "20.0"; a share set elsewhere (API, admin) keeps its decimals instead of being rounded.
    value = round(share * 100, 2)
    return int(value) if value == int(value) else value


class QueueSettingsForm(forms.Form):
    """The project's queue settings. Shares are whole percentages, relative to each other: the queues are
    served in proportion to them."""

    queue_judge = forms.ModelChoiceField(
        queryset=Judge.objects.none(), required=False, empty_label="(none)",
        help_text="the judge whose P the uncertain, conflict and stratified queues use",
    )
    labels_per_item = forms.IntegerField(
        min_value=1, max_value=LABELS_PER_ITEM_MAX, label="Labels per overlap item (k)",
        help_text="labels from different experts wanted on an overlap item",
    )
    overlap_share = forms.FloatField(
        min_value=0, max_value=100, label="Overlap items (%)",
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="share of items that want k labels; the others want one",
    )
    lease_minutes = forms.IntegerField(
        min_value=1, max_value=LEASE_MINUTES_MAX, label="Lease (minutes)",
        help_text="how long an item stays reserved for the expert who opened it",
    )
    reveal_llm_after_submit = forms.BooleanField(
        required=False, label="Show the expert the judge's P after they submit",
        help_text="off: experts label blind, never seeing an LLM's opinion",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        kwargs.setdefault("initial", self._initial(project))
        super().__init__(*args, **kwargs)
        self.fields["queue_judge"].queryset = Judge.objects.filter(project=project).order_by("name")
        shares = {
            f"share_{name}": forms.IntegerField(
                min_value=0, max_value=100, label=name, help_text=QUEUE_STRATEGY_HELP[name]
            )
            for name in QUEUE_STRATEGIES
        }
        self.fields = {**shares, **self.fields}

    @staticmethod
    def _initial(project: Project) -> dict:
        shares = {f"share_{name}": percent for name, percent in queue_mix_percentages(project.queue_mix).items()}
        return {
            **shares,
            "queue_judge": project.queue_judge_id,
            "labels_per_item": project.labels_per_item,
            "overlap_share": _percent(project.overlap_share),
            "lease_minutes": project.lease_minutes,
            "reveal_llm_after_submit": project.reveal_llm_after_submit,
        }

    def share_fields(self) -> list[forms.BoundField]:
        return [self[f"share_{name}"] for name in QUEUE_STRATEGIES]

    def other_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if not name.startswith("share_")]

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        judge = data["queue_judge"]
        return {
            # Strategies left at 0 are dropped, so the stored mix reads like the default {'uncertain': 80, ...}.
            "queue_mix": {name: data[f"share_{name}"] for name in QUEUE_STRATEGIES if data[f"share_{name}"]},
            "queue_judge_id": judge.pk if judge is not None else None,
            "labels_per_item": data["labels_per_item"],
            "overlap_share": data["overlap_share"] / 100,
            "lease_minutes": data["lease_minutes"],
            "reveal_llm_after_submit": data["reveal_llm_after_submit"],
        }


class StoppingForm(forms.Form):
    """When labelling stops paying (#33): a recall target of the verified qrels, with its confidence, and a budget."""

    stop_recall = forms.FloatField(
        required=False, min_value=0.01, max_value=1, label="Recall target",
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="met when P(recall of the verified qrels >= this) >= 1 - alpha under the queue judge; empty: none",
    )
    stop_alpha = forms.FloatField(
        min_value=0.001, max_value=0.5, label="Alpha", widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="0.1: the target is met at 90 % probability",
    )
    stop_kappa = forms.FloatField(
        required=False, min_value=-0.99, max_value=1, label="Kappa target",
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="met when the queue judge's kappa on the random validation sample has its 95 % interval starting at "
                  "or above this; empty: none",
    )
    stop_budget = forms.IntegerField(
        required=False, min_value=1, max_value=2_000_000_000, label="Label budget",
        help_text="current labels after which experts stop getting items; empty: none",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        kwargs.setdefault("initial", {"stop_recall": project.stop_recall, "stop_alpha": project.stop_alpha,
                                      "stop_kappa": project.stop_kappa, "stop_budget": project.stop_budget})
        kwargs.setdefault("prefix", "stopping")
        super().__init__(*args, **kwargs)


class DefinitionDraftForm(forms.Form):
    """Ask one of the project's generative judges (the view passes them) to draft the query's definition."""

    judge = forms.ModelChoiceField(queryset=Judge.objects.none(), empty_label=None, label="Judge")
    refine = forms.BooleanField(
        required=False, label="Refine from labelled examples",
        help_text="improve the current definition from the passages experts labelled relevant",
    )

    def __init__(self, *args, judges: QuerySet[Judge], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["judge"].queryset = judges


class RunUploadForm(forms.Form):
    """A TREC run file to import as a run of the project (the Systems page)."""

    name = forms.CharField(max_length=200, help_text="the run's name in this project")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    file = forms.FileField(help_text="TREC run format: query_id Q0 passage_id rank score tag, one line per passage")


class RetrievalForm(forms.Form):
    """Start a built-in retriever over the project's passages, optionally re-ranked by one of the project's local
    judges (the API and the command take several stages). The page shows every size, so the form passes on only
    those of the chosen retriever: the service refuses the others."""

    retriever = forms.ChoiceField(choices=[(kind.value, kind.label) for kind in RunKind if kind != RunKind.IMPORTED])
    name = forms.CharField(max_length=200, help_text="the run it writes")
    depth = forms.IntegerField(min_value=1, max_value=MAX_DEPTH, initial=DEFAULT_DEPTH,
                               help_text="passages ranked per query (bm25, dense)")
    use_definition = forms.BooleanField(required=False, label="Query with its relevance definition",
                                        help_text="the query text is the question and its current definition")
    first_depth = forms.IntegerField(min_value=1, max_value=MAX_DEPTH, initial=DEFAULT_FIRST_DEPTH,
                                     label="Cascade: candidates (N)",
                                     help_text="BM25's N best passages per query go to the dense re-ranker")
    keep = forms.IntegerField(min_value=1, max_value=MAX_DEPTH, initial=DEFAULT_KEEP, label="Cascade: kept (M)",
                              help_text="the re-ranker's M best of them are the run (M <= N)")
    rerank_judge = forms.ChoiceField(choices=[], required=False, label="Re-rank with judge",
                                     help_text="a judge whose model scores pairs here (crossencoder, embedding, hf) "
                                               "re-ranks each query's passages by its P")
    rerank_keep = forms.IntegerField(min_value=1, max_value=MAX_DEPTH, initial=DEFAULT_KEEP, required=False,
                                     label="Re-rank: kept (K)",
                                     help_text="the judge's K best by P are the run (K <= depth, or M)")
    preset = forms.ChoiceField(choices=[("", "(none)"), (CRISIS_PRESET, "crisis double cascade (the crisis paper)")],
                               required=False, label="Preset",
                               help_text="crisis double cascade: a cascade whose N BM25 candidates the judge above "
                                         "re-ranks, keeping M; the kept passages of all queries are searched densely "
                                         "and re-ranked by the judge again (the re-rank K is not used)")
    dense_depth = forms.IntegerField(min_value=1, max_value=MAX_DEPTH, initial=CRISIS_DEFAULTS.dense_depth,
                                     required=False, label="Crisis: dense depth",
                                     help_text="passages per query ranked over the filtered corpus, or the share "
                                               "below of it when smaller")
    dense_fraction = forms.FloatField(min_value=0.001, max_value=1, initial=CRISIS_DEFAULTS.dense_fraction,
                                      required=False, label="Crisis: share of the filtered corpus")
    final_fraction = forms.FloatField(min_value=0.001, max_value=1, initial=CRISIS_DEFAULTS.final_fraction,
                                      required=False, label="Crisis: share kept at the end",
                                      help_text="of each query's dense ranking, after the final re-ranking")

    def __init__(self, *args, judges: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["rerank_judge"].choices = [("", "(none)")] + [(name, name) for name in judges]

    def clean(self) -> dict:
        data = super().clean()
        if data.get("preset"):
            if data.get("retriever") != RunKind.CASCADE:
                self.add_error("preset", "the crisis double cascade is a cascade: choose the cascade retriever")
            if not data.get("rerank_judge"):
                self.add_error("rerank_judge", "the crisis double cascade re-ranks twice with this judge: choose one")
        elif data.get("rerank_judge") and data.get("rerank_keep") is None:
            self.add_error("rerank_keep", "say how many passages per query the judge keeps")
        return data

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        arguments = {"retriever": data["retriever"], "name": data["name"], "use_definition": data["use_definition"]}
        if data["preset"]:
            arguments["crisis"] = {"judge": data["rerank_judge"]} | {
                key: data[key] for key in ("dense_depth", "dense_fraction", "final_fraction") if data[key] is not None}
        elif data["rerank_judge"]:
            arguments["rerank"] = [{"judge": data["rerank_judge"], "keep": data["rerank_keep"]}]
        if data["retriever"] == RunKind.CASCADE:
            return arguments | {"first_depth": data["first_depth"], "keep": data["keep"]}
        return arguments | {"depth": data["depth"]}


class PoolForm(forms.Form):
    """Pool the top `depth` passages of the chosen runs (by name); a judge's prices turn the preview's new pairs
    into the cost of judging them."""

    runs = forms.MultipleChoiceField(choices=[], widget=forms.CheckboxSelectMultiple)
    depth = forms.IntegerField(min_value=1, initial=10, help_text="top passages of each run per query")
    judge = forms.ChoiceField(choices=[], required=False, label="Judge (for the cost)")

    def __init__(self, *args, runs: list[str], judges: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["runs"].choices = [(name, name) for name in runs]
        self.fields["judge"].choices = [("", "(none)")] + [(name, name) for name in judges]


class TrainingSetSampleForm(forms.Form):
    """DIRAS's sample of a run as a training set (the Fine-tuning page): per query, passages drawn at random from
    within the run's top and from outside it, split train / held-out by query."""

    name = forms.CharField(max_length=200, help_text="the training set's name in this project")
    run = forms.ChoiceField(choices=[], help_text="the run whose top is sampled")
    top = forms.IntegerField(min_value=1, initial=DIRAS_TOP, label="Top",
                             help_text="the top per query (each report's top when passages name their report)")
    inside = forms.IntegerField(min_value=0, initial=DIRAS_INSIDE, label="Inside",
                                help_text="passages per query drawn at random from within the top")
    outside = forms.IntegerField(min_value=0, initial=DIRAS_OUTSIDE, label="Outside",
                                 help_text="passages per query drawn at random from outside the top")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="the draw's and the split's seed")
    held_out = forms.FloatField(min_value=0.0, max_value=MAX_HELD_OUT, required=False, label="Held-out share",
                                help_text="share of the queries kept out of training; empty: DIRAS's 11 of 31 for "
                                          "report data, else 0.2")

    def __init__(self, *args, runs: list[str], default_run: str | None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = [(name, name) for name in runs]
        self.fields["run"].initial = default_run


class TrainingSetImportForm(forms.Form):
    """A DIRAS-layout CSV with the teacher's answers as a training set (the Fine-tuning page)."""

    name = forms.CharField(max_length=200, help_text="the training set's name in this project")
    file = forms.FileField(help_text="input,output (ASQA) or question,document,guess,confidence (QAMPARI, "
                                     "RAG-Bench); UTF-8")
    held_out = forms.FloatField(min_value=0.0, max_value=MAX_HELD_OUT, initial=0.2, label="Held-out share",
                                help_text="share of the questions kept out of training")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="the split's seed")
    skip_bad = forms.BooleanField(required=False, label="Leave bad rows out",
                                  help_text="else one bad row refuses the whole file")


class FinetuneForm(forms.Form):
    """A fine-tuning job (the Fine-tuning page): a LoRA adapter of a causal LM or a cross-encoder student, each with
    its own base folder and settings (LoraSettings' and CrossEncoderSettings' fields, prefilled with the kind's
    defaults by the view; a setting left empty keeps its default). Only the chosen kind's fields are passed on; the
    service checks their ranges."""

    SETTINGS = ("r", "alpha", "dropout", "learning_rate", "warmup_ratio", "batch_size", "micro_batch", "epochs",
                "max_steps", "source_max_length", "target_max_length", "save_steps")
    LORA_FIELDS = ("base_model", *SETTINGS)
    # The cross-encoder's fields and the CrossEncoderSettings field each one sets.
    CROSSENCODER_SETTINGS: ClassVar[dict[str, str]] = {"ce_epochs": "epochs", "ce_learning_rate": "learning_rate",
                                                       "ce_batch_size": "batch_size", "ce_max_length": "max_length",
                                                       "ce_expert_weight": "expert_weight"}
    CROSSENCODER_FIELDS = ("ce_base_model", *CROSSENCODER_SETTINGS)

    training_set = forms.ChoiceField(choices=[])
    teacher = forms.ChoiceField(choices=[], required=False,
                                help_text="whose judgments of the set's pairs are the answers; none for a file's set")
    student = forms.ChoiceField(choices=FineTuneJob.StudentKind.choices, initial=FineTuneJob.StudentKind.LORA,
                                help_text="the settings below of the kind chosen are used")
    student_name = forms.CharField(max_length=STUDENT_NAME_MAX_LENGTH, help_text="the judge it makes")
    base_model = forms.CharField(max_length=300, required=False, label="Base model folder",
                                 help_text="a causal LM under a model root")
    r = forms.IntegerField(label="LoRA r", required=False)
    alpha = forms.IntegerField(label="LoRA alpha", required=False)
    dropout = forms.FloatField(label="LoRA dropout", required=False)
    learning_rate = forms.FloatField(required=False)
    warmup_ratio = forms.FloatField(label="Warm-up ratio", required=False)
    batch_size = forms.IntegerField(required=False, help_text="effective batch: micro batches accumulated")
    micro_batch = forms.IntegerField(required=False, help_text="examples per forward pass")
    epochs = forms.FloatField(required=False)
    max_steps = forms.IntegerField(required=False, help_text="0: as many as the epochs take")
    source_max_length = forms.IntegerField(required=False, label="Source max length",
                                           help_text="the prompt's tokens at most; a longer one has its passage cut")
    target_max_length = forms.IntegerField(required=False, label="Target max length",
                                           help_text="the answer's tokens at most (never cut)")
    save_steps = forms.IntegerField(required=False, help_text="a checkpoint every this many steps")
    ce_base_model = forms.CharField(
        max_length=300, required=False, label="Base encoder folder",
        widget=forms.TextInput(attrs={"placeholder": "empty: the bundled all-MiniLM-L6-v2"}),
        help_text="a cross-encoder or a plain encoder under a model root (a plain one gets a new one-logit head)")
    ce_epochs = forms.FloatField(required=False, label="Epochs")
    ce_learning_rate = forms.FloatField(required=False, label="Learning rate")
    ce_batch_size = forms.IntegerField(required=False, label="Batch size")
    ce_max_length = forms.IntegerField(required=False, label="Max length", help_text="longest pair in tokens")
    ce_expert_weight = forms.FloatField(required=False, label="Expert weight",
                                        help_text="a pair the experts labelled learns their answer with this weight "
                                                  "(0: the teacher's answers only)")
    device = forms.CharField(max_length=32, initial="cpu", help_text="cpu, cuda, cuda:1...")

    def __init__(self, *args, training_sets: list[str], teachers: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["training_set"].choices = [(name, name) for name in training_sets]
        self.fields["teacher"].choices = [("", "(none: the set's file answers)")] + [(n, n) for n in teachers]

    def service_arguments(self) -> dict:
        """The chosen student kind, its base folder and the settings given, as finetune_create takes them."""
        data = self.cleaned_data
        if data["student"] == FineTuneJob.StudentKind.CROSSENCODER:
            base, chosen = data["ce_base_model"], self.CROSSENCODER_SETTINGS
        else:
            base, chosen = data["base_model"], {name: name for name in self.SETTINGS}
        return {"student": data["student"], "base_model": base, "device": data["device"],
                "hyperparameters": {field: data[name] for name, field in chosen.items() if data[name] is not None}}


def _scale_text(scale: LabelScale) -> str:
    """The scale's JSON with one grade per line: readable in a textarea, and still JSON."""
    data = scale.to_json()
    grades = ",\n".join(f"  {json.dumps(grade)}" for grade in data["grades"])
    return f'{{"grades": [\n{grades}\n], "relevant_from": {json.dumps(data["relevant_from"])}}}'


class ProjectCreateForm(forms.Form):
    """A new, empty project (the project list, for staff); its data comes as a bundle on its Import page."""

    name = forms.CharField(max_length=200)
    slug = forms.SlugField(max_length=64, help_text="its address: letters, digits, '-' and '_'")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    scale = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}), required=False,
        initial=_scale_text(DEFAULT_SCALE),
        help_text='{"grades": [{"value", "name", "gain"}, ...], "relevant_from": grade}; a bundle\'s project.json '
                  "may set it too, until the project has pairs",
    )

    def clean_scale(self) -> LabelScale | None:
        raw = self.cleaned_data["scale"].strip()
        if not raw:
            return None
        try:
            return LabelScale.from_json(json.loads(raw))
        except ValueError as exc:
            # json's errors and ScaleError (a DomainError, so a ValueError) both say what is wrong.
            raise forms.ValidationError(str(exc)) from None


class BundleUploadForm(forms.Form):
    """A bundle archive to import into the project (its Import page)."""

    file = forms.FileField(help_text="a .zip or .tar.gz of a bundle folder (docs/bundle-format.md): its files at the "
                                     "archive's top or in one folder")
    all_pairs = forms.BooleanField(required=False, label="Make the pool every query x passage (--all-pairs)")
    query_set = forms.CharField(required=False, max_length=MAX_SET_CHARS, strip=True,
                                label="Query set of the queries whose metadata names none (--query-set)")

    def clean_query_set(self) -> str:
        raw = self.cleaned_data["query_set"]
        try:
            return query_set_name(raw) if raw else ""
        except NameRefused as exc:
            raise forms.ValidationError(str(exc)) from None


PERTURBATION_TEST_LABELS = {
    "length": "Length: padded to 512 and 1024 words", "stuffing": "Keyword stuffing",
    "injection": "Prompt injection", "definition": "Without the relevance definition",
    "consistency": "Self-consistency: asked twice with sampling",
}


class PerturbationAuditForm(forms.Form):
    """A perturbation audit of a judge (its Robustness page): a seeded sample of the gold pairs, changed by the
    chosen tests. The service checks the rest (docs/robustness.md)."""

    sample = forms.IntegerField(min_value=1, max_value=settings.AUDIT_MAX_SAMPLE, initial=200,
                                help_text="gold pairs drawn")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="the draw's seed")
    tests = forms.MultipleChoiceField(choices=[(test, PERTURBATION_TEST_LABELS[test]) for test in PERTURBATION_TESTS],
                                      initial=list(PERTURBATION_TESTS), widget=forms.CheckboxSelectMultiple)

    def parameters(self) -> dict:
        return {name: self.cleaned_data[name] for name in ("sample", "seed", "tests")}


class BeyondPoolForm(forms.Form):
    """Look beyond the pool (the Systems page): a judge scores a seeded sample of each run's entries that never
    entered the pool. The service checks the rest (docs/validation.md, "Beyond the pool")."""

    judge = forms.ChoiceField(choices=[], help_text="a judge with a model of its own (not imported, not an ensemble)")
    sample = forms.IntegerField(min_value=1, max_value=settings.AUDIT_MAX_SAMPLE, initial=200,
                                help_text="entries below the pool drawn per run")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="the draw's seed")

    def __init__(self, *args, judges: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["judge"].choices = [(name, name) for name in judges]

    def parameters(self) -> dict:
        return {name: self.cleaned_data[name] for name in ("sample", "seed")}


class QueryGenerationForm(forms.Form):
    """LLM query generation (DisastIR 3.4, the Systems page): a generative judge writes one query per chosen
    passage and intent, as a new query set. The passages: a seeded sample, or those with a metadata value. The
    service checks the rest (labeling/services/query_generation.py)."""

    judge = forms.ChoiceField(choices=[], help_text="a judge whose model writes text (hf or openai)")
    query_set = forms.CharField(max_length=100, initial="llm", help_text="the new query set's name")
    intents = forms.MultipleChoiceField(choices=[(name, name) for name in GENERATION_INTENTS],
                                        initial=list(GENERATION_INTENTS), widget=forms.CheckboxSelectMultiple,
                                        help_text="DisastIR's search intents: one query each per passage")
    sample = forms.IntegerField(min_value=1, required=False, initial=48,
                                help_text="passages drawn at random (empty: those with the metadata value below)")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="the draws' seed")
    where = forms.CharField(max_length=400, required=False, label="Metadata value",
                            help_text="KEY=VALUE: the passages whose metadata has it (instead of a sample)")
    prompts = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                              help_text='edited prompts as JSON {"FC": {"need": "...", "query": "..."}}; empty: '
                                        "the paper's (App. B)")
    positive_grade = forms.TypedChoiceField(choices=[], coerce=int, empty_value=None, required=False,
                                            help_text="a reference grade for the generated positives (empty: none, "
                                                      "judges and experts grade them)")

    def __init__(self, *args, judges: list[str], grades: list[tuple[int, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["judge"].choices = [(name, name) for name in judges]
        self.fields["positive_grade"].choices = [("", "none"), *((str(value), name) for value, name in grades)]

    def clean_where(self) -> tuple[str, str] | None:
        raw = self.cleaned_data["where"].strip()
        if not raw:
            return None
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise forms.ValidationError("KEY=VALUE, a passage metadata key and its value")
        return key.strip(), value

    def clean_prompts(self) -> dict | None:
        raw = self.cleaned_data["prompts"].strip()
        if not raw:
            return None
        try:
            found = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(found, dict) or not all(isinstance(edit, dict) for edit in found.values()):
            raise forms.ValidationError('a JSON object {intent: {"need": text, "query": text}}')
        return found

    def clean(self) -> dict:
        data = super().clean()
        if data.get("where") is not None:
            data["sample"] = None
        elif data.get("sample") is None and "where" not in self.errors:
            raise forms.ValidationError("give a sample size or a metadata value")
        return data

    def plan_arguments(self) -> dict:
        data = self.cleaned_data
        return {"query_set": data["query_set"], "intents": data["intents"], "prompts": data["prompts"],
                "sample": data["sample"], "seed": data["seed"], "where": data["where"],
                "positive_grade": data["positive_grade"]}


class MulticonditionAuditForm(forms.Form):
    """The MultiConIR tests of a judge on the project's multi-condition items (its Robustness page)."""

    pads = forms.MultipleChoiceField(choices=[(str(words), f"{words} words") for words in PAD_WORDS],
                                     initial=[str(words) for words in PAD_WORDS], required=False,
                                     widget=forms.CheckboxSelectMultiple, label="Task 4: documents padded to",
                                     help_text="none: Task 4 is left out")
    filler = forms.CharField(initial=PAPER_FILLER, max_length=2000, strip=True, required=False,
                             widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="Task 4: its sentences go between each document's sentences up to the length "
                                       "(empty: MultiConIR's)")

    def parameters(self) -> dict:
        return {"pads": [int(words) for words in self.cleaned_data["pads"]],
                "filler": self.cleaned_data["filler"] or PAPER_FILLER}
