# Set-up is automatic: every target below builds .venv first when it is missing or stale.
#   make course   run the whole course headless against the reference solutions; print a report
#   make test     the test suite (what CI runs)
#   make check    the quick edit-test loop: lint, fast tests, one stage per project (< 3 min)
#   make lab      JupyterLab on localhost with the course kernel
#   make bench    benchmark figures, printed as ratios measured side by side
#   make portfolio  your route map and benchmark report from your own records
#   make mlflow-ui  the MLflow record of every run (failed ones too) on http://127.0.0.1:5000
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUILD := build
PYTEST_ARGS ?=
LAB_PORT ?= 8888
COURSE_ARGS ?=

.PHONY: setup course test check lab bench starters portfolio mlflow-ui browser-deps clean help
help:
	@sed -n '1,9p' Makefile

setup: $(STAMP)

# Reinstalls only when pyproject.toml changes; a second `make` costs nothing.
$(STAMP): pyproject.toml
	@PYBIN="$$(scripts/find-python)" || exit 1; \
	if [ ! -x "$(PY)" ] || ! "$(PY)" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then \
	  echo "creating $(VENV) with $$PYBIN ($$("$$PYBIN" --version))"; \
	  rm -rf "$(VENV)"; "$$PYBIN" -m venv "$(VENV)"; \
	fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	$(PY) -m coursekit.facts register-kernel
	@touch $(STAMP)
	@echo "environment ready: $(VENV) ($$($(PY) --version)), course kernel registered"

course: $(STAMP)
	$(PY) -m coursekit.commands.course --out $(BUILD)/course $(COURSE_ARGS)

# Debian's chromium for tests/test_browser_lab.py (playwright drives it; never `playwright install`)
browser-deps:
	@scripts/browser-deps

test: $(STAMP) browser-deps
	@set +e; PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests (exit 5): that is a failure here"; exit 1; fi; \
	exit $$rc

check: $(STAMP)
	@PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m coursekit.commands.quick_check

lab: $(STAMP)
	$(PY) -m coursekit.commands.lab --port $(LAB_PORT)

bench: $(STAMP)
	$(PY) -m coursekit.commands.bench --out $(BUILD)/bench

portfolio: $(STAMP)
	$(PY) -m coursekit.portfolio --records $(BUILD)/learner --out $(BUILD)/portfolio

mlflow-ui: $(STAMP)
	$(PY) -m coursekit.provenance ui

starters: $(STAMP)
	$(PY) -m coursekit.authoring.starters

clean:
	rm -rf $(BUILD) .pytest_cache
