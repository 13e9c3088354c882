"""annotator/settings.py: production passes `check --deploy`, a missing secret fails loudly, and local
defaults (secret key, SQLite, filesystem broker) live under VAR_DIR."""
import os
import runpy
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_FILE = ROOT / "annotator" / "settings.py"
CONFIG_NAMES = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "CELERY_BROKER_URL",
    "VAR_DIR",
)


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in CONFIG_NAMES and not k.startswith("SECURE_")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def load_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict:
    """Execute the settings module afresh under `env`, as a new process start would."""
    for name in (*CONFIG_NAMES, "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


def test_production_environment_passes_check_deploy(tmp_path):
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(60)[:60],
            "ALLOWED_HOSTS": "annotator.example.org",
            "VAR_DIR": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_without_secret_key_refuses_to_start(tmp_path):
    result = manage("check", env={"DEBUG": "0", "VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_local_secret_key_is_generated_once_and_reused(monkeypatch, tmp_path):
    first = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))
    second = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))

    key_file = tmp_path / "secret_key"
    assert first["SECRET_KEY"] == second["SECRET_KEY"] == key_file.read_text().strip()
    assert len(first["SECRET_KEY"]) >= 50
    assert key_file.stat().st_mode & 0o077 == 0


def test_local_secret_key_is_created_private_not_narrowed_after_being_written(monkeypatch, tmp_path):
    """A key written with the umask's mode and chmod-ed afterwards was readable by others in between: with nothing
    to narrow it afterwards, the file must still be the owner's alone."""
    monkeypatch.setattr(Path, "chmod", lambda *args, **kwargs: None)
    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)
    previous = os.umask(0o022)
    try:
        config = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))
    finally:
        os.umask(previous)
    key_file = tmp_path / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert config["SECRET_KEY"] == key_file.read_text()


def test_local_database_defaults_to_sqlite_under_var_dir(monkeypatch, tmp_path):
    config = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))

    database = config["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(database["NAME"]).parent == tmp_path


def test_database_url_selects_postgresql(monkeypatch, tmp_path):
    config = load_settings(
        monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), DATABASE_URL="postgres://u:p@db.example.org:5432/annotator"
    )

    database = config["DATABASES"]["default"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["NAME"]) == ("db.example.org", "annotator")


def test_local_broker_defaults_to_filesystem_folders_under_var_dir(monkeypatch, tmp_path):
    config = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))

    assert config["CELERY_BROKER_URL"] == "filesystem://"
    assert config["CELERY_BROKER_TRANSPORT"] == "annotator.broker:Transport"  # atomic message files
    options = config["CELERY_BROKER_TRANSPORT_OPTIONS"]
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        folder = Path(options[key])
        assert folder.is_dir()
        assert tmp_path in folder.parents


def test_llm_endpoints_declare_assistant_prefill_as_true_or_false(monkeypatch, tmp_path):
    declared = ('{"vllm": {"base_url": "http://gpu1.internal:8001/v1/", "allow_local": true, "prefill": true},'
                ' "openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}}')
    endpoints = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), LLM_ENDPOINTS=declared)["LLM_ENDPOINTS"]
    assert endpoints == {
        "vllm": {"base_url": "http://gpu1.internal:8001/v1", "api_key_env": "", "allow_local": True, "prefill": True,
                 "label_token_ids": None},
        "openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY", "allow_local": False,
                   "prefill": False, "label_token_ids": None},
    }
    with pytest.raises(ImproperlyConfigured, match=r"LLM_ENDPOINTS\['vllm'\].prefill must be true or false"):
        load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path),
                      LLM_ENDPOINTS='{"vllm": {"base_url": "http://gpu1.internal:8001/v1", "prefill": "yes"}}')


def test_llm_endpoints_declare_the_token_ids_of_yes_and_no(monkeypatch, tmp_path):
    def endpoints(labels: str) -> dict:
        declared = f'{{"vllm": {{"base_url": "http://gpu1.internal:8001/v1", "label_token_ids": {labels}}}}}'
        return load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), LLM_ENDPOINTS=declared)["LLM_ENDPOINTS"]

    assert endpoints('{"Yes": [9642, 7566], "No": [2822]}')["vllm"]["label_token_ids"] == {
        "Yes": [9642, 7566], "No": [2822]}
    where = r"LLM_ENDPOINTS\['vllm'\].label_token_ids"
    for labels, problem in [
        ('[9642, 2822]', where + r' must be \{"Yes": \[token ids\], "No": \[token ids\]\}'),
        ('{"Yes": [9642]}', where + " must be"),
        ('{"yes": [9642], "No": [2822]}', where + " must be"),
        ('{"Yes": [], "No": [2822]}', where + r".Yes must be a non-empty list of distinct token ids"),
        ('{"Yes": [9642], "No": ["No"]}', where + r".No must be a non-empty list"),
        ('{"Yes": [9642, 9642], "No": [2822]}', where + r".Yes must be a non-empty list of distinct"),
        ('{"Yes": [-1], "No": [2822]}', where + r".Yes must be"),
        ('{"Yes": [true], "No": [2822]}', where + r".Yes must be"),
        ('{"Yes": [9642, 2822], "No": [2822]}', where + r": token ids \[2822\] are listed under both Yes and No"),
    ]:
        with pytest.raises(ImproperlyConfigured, match=problem):
            endpoints(labels)


def test_invitation_links_last_invitation_days_and_are_emailed_only_with_an_email_backend(monkeypatch, tmp_path):
    for name in ("INVITATION_DAYS", "EMAIL_BACKEND", "DEFAULT_FROM_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    config = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))
    assert (config["INVITATION_DAYS"], config["INVITATION_EMAIL"]) == (7, False)

    config = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), INVITATION_DAYS="2",
                           EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
                           DEFAULT_FROM_EMAIL="labels@example.org")
    assert (config["INVITATION_DAYS"], config["INVITATION_EMAIL"]) == (2, True)
    assert (config["EMAIL_BACKEND"], config["DEFAULT_FROM_EMAIL"]) == (
        "django.core.mail.backends.smtp.EmailBackend", "labels@example.org")

    with pytest.raises(ImproperlyConfigured, match="INVITATION_DAYS=0 must be at least 1"):
        load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), INVITATION_DAYS="0")
    with pytest.raises(ImproperlyConfigured, match="INVITATION_DAYS='a week' is not an integer"):
        load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), INVITATION_DAYS="a week")
