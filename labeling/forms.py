"""HTML forms: parse and check what a page posts before a service sees it."""
from __future__ import annotations

import json

from django import forms

from labeling.models import Judge, Project


class JudgeForm(forms.Form):
    name = forms.CharField(max_length=200)
    backend = forms.ChoiceField(choices=[("hf", "hf: local transformers model"),
                                         ("openai", "openai: OpenAI-compatible API"),
                                         ("embedding", "embedding: cosine similarity baseline")])
    model = forms.CharField(max_length=300, help_text="a model folder (hf, embedding) or a model name (openai)")
    method = forms.ChoiceField(choices=[("tok", "Tok: P from the Yes/No next-token logits"),
                                        ("ask", "Ask: parse the stated confidence")], required=False)
    cot = forms.BooleanField(required=False, label="Ask for a reason first (CoT)")
    no_definition = forms.BooleanField(required=False, label="Leave the relevance definition out")
    adapter = forms.CharField(max_length=300, required=False, help_text="peft LoRA adapter folder (hf)")
    base_url = forms.CharField(max_length=300, required=False, help_text="openai: e.g. http://127.0.0.1:8000/v1")
    api_key_env = forms.CharField(max_length=100, required=False,
                                  help_text="openai: NAME of the environment variable that holds the key")
    copy_template_from = forms.ModelChoiceField(queryset=Judge.objects.none(), required=False,
                                                help_text="start from another judge's prompt template")
    template = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False,
                               help_text="JSON prompt template blocks overriding the default (optional)")

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["copy_template_from"].queryset = Judge.objects.filter(project=project).order_by("name")

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

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        template = data["template"]
        source = data["copy_template_from"]
        if template is None and source is not None and source.prompt.strip():
            template = json.loads(source.prompt)
        backend = data["backend"]
        return {
            "name": data["name"],
            "backend": backend,
            "model": data["model"],
            "template": template,
            "method": "embedding" if backend == "embedding" else (data["method"] or "tok"),
            "cot": data["cot"] or None,
            "use_definition": False if data["no_definition"] else None,
            "adapter": data["adapter"] or None,
            "base_url": data["base_url"] or None,
            "api_key_env": data["api_key_env"] or None,
        }
