"""The import graph tells the truth: a web process starts without the model libraries (models_llm loads them lazily,
inside the functions that need them), and an import inside a function says why on its line or the line above."""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_LIBRARIES = ("torch", "transformers", "peft", "sentence_transformers")


def test_a_web_process_imports_every_url_without_loading_torch_or_transformers():
    # A fresh process, as a web server starts: the URLconf imports every view, form, API, selector and service.
    script = (
        "import json, sys, django; django.setup(); import annotator.urls\n"
        f"print(json.dumps([name for name in {MODEL_LIBRARIES!r} if name in sys.modules]))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "annotator.settings", "DEBUG": "1"}
    out = subprocess.run([sys.executable, "-c", script], check=False, cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert not loaded, f"importing the URLconf loaded {loaded}"


def _function_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    yield node.lineno


def test_every_import_inside_a_function_says_why():
    # The two reasons CONVENTIONS.md allows: a Celery task importing its service, a heavy library loaded lazily.
    # Anything else (a cycle dodged) is fixed by layering, at the top of the module.
    unexplained = []
    for package in ("labeling", "annotator"):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            for lineno in sorted(set(_function_imports(path))):
                above = lines[lineno - 2].strip() if lineno >= 2 else ""
                if "#" not in lines[lineno - 1] and not above.startswith("#"):
                    unexplained.append(f"{path.relative_to(ROOT)}:{lineno}: {lines[lineno - 1].strip()}")
    assert not unexplained, "imports inside functions with no comment saying why:\n" + "\n".join(unexplained)
