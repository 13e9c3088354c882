"""Declaring a test's own OpenAI-compatible server as an operator-declared endpoint (settings.LLM_ENDPOINTS)."""
import json

from django.conf import settings


def declare_endpoint(base_url: str, name: str = "local", *, api_key_env: str = "", allow_local: bool = True) -> str:
    """Declare `base_url` as endpoint `name` for this test (the autouse llm_endpoints fixture resets the
    declarations after it); returns the name, for judge_create(endpoint=...)."""
    settings.LLM_ENDPOINTS[name] = {"base_url": base_url.rstrip("/"), "api_key_env": api_key_env,
                                    "allow_local": allow_local}
    return name


def endpoints_env() -> str:
    """The declared endpoints as the LLM_ENDPOINTS value a worker process started by the test needs."""
    return json.dumps(settings.LLM_ENDPOINTS)
