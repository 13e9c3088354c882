"""Plain-Python LLM judging and evaluation: numbers and dataclasses in, numbers and dataclasses out.

Nothing here imports Django or `labeling`; `labeling` adapts its rows to these functions."""
