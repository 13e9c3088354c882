"""Shared fixtures. The suite runs on DATABASE_URL when set (PostgreSQL in CI), else on SQLite."""
import os

os.environ.setdefault("DEBUG", "1")
