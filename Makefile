# Set-up is automatic: every target below builds .venv first when it is missing or stale.
#   make setup    only the set-up: .venv with the pinned packages, the course's kernel
# course-only {
#   make course   run the whole course headless against the reference solutions
#   make test     the test suite (what CI runs)
#   make check    the quick edit-test loop: lint, fast tests, one stage per project (< 3 min)
# } course-only
# release-only {
#   make course   every notebook headless and every project's checks, on your code
#   make test     every project's checks on your code (CHECK_ARGS="--only foundations --stage 1")
#   make check    the quick loop: one stage of every project on your code (CHECK_ARGS as make test)
# } release-only
#   make lab      JupyterLab on localhost with the course kernel
#   make portfolio  your route map and benchmark report from your own records
#   make mlflow-ui  the MLflow record of every run (failed ones too) on http://127.0.0.1:5000
#   make xprof    XProf's trace viewer on your own profiler traces on http://127.0.0.1:8791
#   make clean    remove what was built (build/), keeping your own records (build/learner)
# course-only {
#   make bench    benchmark figures, printed as ratios measured side by side
#   make mutants  developers: each checker's mutation score per stage (slow; MUTANTS_PROJECT=p)
#   make mistakes developers: each checker's catch rate on a learner-mistake corpus (slow)
#   make flake    developers: the reference passes every stage FLAKE_RUNS times, a core busy
#   make accelerator  the course on this machine's accelerator, a report in build/accelerator (docs/tpu.md)
#   make starters developers: the starters and sealed programs again from the solutions
#   make floor    developers: JAX's oldest supported version into build/jax-floor (make test does)
#   make browser-deps, make slurm-deps  Debian's chromium, slurm and munge for make test (as root)
# } course-only
# (A release, python -m autograder release, leaves out what needs the course's own tree:
# the course-only blocks of this file; its release-only blocks are the release's help.)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUILD := build
# The oldest JAX the course supports (coursekit/compat/jaxapi.py: FLOOR), beside the pinned
# one: the sealed programs are written by it and make test runs the course under it
FLOOR_STAMP := $(BUILD)/jax-floor/.installed
PYTEST_ARGS ?=
# make test: pytest workers (pytest-xdist; 0 runs the suite in this one process)
PYTEST_WORKERS ?= 2
LAB_PORT ?= 8888
COURSE_ARGS ?=
# make test and make check in a release: CHECK_ARGS="--only performance-audit --stage 1"
CHECK_ARGS ?=
# course-only {
# make accelerator ACCELERATOR_ARGS='--part notebooks --resume' (docs/tpu.md)
ACCELERATOR_ARGS ?=
MUTANTS_PROJECT ?=
MUTANTS_JOBS ?= 1
MUTANTS_SAMPLE ?=
MUTANTS_STAGE ?=
MISTAKES_PROJECT ?=
MISTAKES_STAGE ?=
MISTAKES_JOBS ?= 1
MISTAKES_CORPUS ?= all
# make mistakes MISTAKES_MATCH=blind-b2-: only the mistakes whose id holds this text
MISTAKES_MATCH ?=
FLAKE_RUNS ?= 20
FLAKE_PROJECT ?=
FLAKE_STAGE ?=
# make flake FLAKE_LOAD=heavy: every core busy plus a memory hog (inconclusive allowed, never FAIL)
FLAKE_LOAD ?= busy
FLAKE_IMPL ?=
# } course-only
# A release (python -m autograder release) has no reference solutions: coursekit.facts decides.
IS_RELEASE = $(PY) -c 'import sys; from coursekit.facts import is_release; sys.exit(not is_release())'

.PHONY: setup course test check lab portfolio mlflow-ui xprof clean help
# course-only {
.PHONY: accelerator bench starters mutants mistakes flake browser-deps slurm-deps floor
# } course-only
help:
	@awk '/^SHELL/ {exit} /^# release-only \{/ {skip=1; next} /^# \} release-only/ {skip=0; next} \
	  /course-only|^# \(A release|^# the course-only/ {next} !skip' $(firstword $(MAKEFILE_LIST))

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

# course-only {
# jax and jaxlib FLOOR into build/jax-floor (pip --target, about 380 MB); again only when
# FLOOR changes (the stamp holds it)
floor: $(FLOOR_STAMP)

$(FLOOR_STAMP): $(STAMP) coursekit/compat/jaxapi.py
	$(PY) -m coursekit.authoring.jaxfloor
# } course-only

course: $(STAMP)
	$(PY) -m coursekit.commands.course --out $(BUILD)/course $(COURSE_ARGS)

# course-only {
# Every checker (solution and starter), every notebook headless and the roofline, in turn on
# the accelerator; on a machine without the venv: python3 -m coursekit.commands.accelerator
accelerator: $(STAMP)
	$(PY) -m coursekit.commands.accelerator $(ACCELERATOR_ARGS)
# } course-only

# course-only {
# Debian's chromium for the browser test (playwright drives it; never `playwright install`)
browser-deps:
	@scripts/browser-deps

# Debian's slurm-wlm and munge for the Slurm grading test (it starts its own daemons)
slurm-deps:
	@scripts/slurm-deps
# } course-only

# In a release there is no test suite: the public checks on the learner's code instead
# (exit status as check.py's: 0 only when every check passed). Course: unchanged.
test: $(STAMP)
	@if $(IS_RELEASE); then \
	  $(PY) -m coursekit.commands.course --checks-only --out $(BUILD)/course $(CHECK_ARGS); exit $$?; \
	fi; \
	$(MAKE) --no-print-directory floor || exit $$?; \
	scripts/browser-deps || exit $$?; \
	scripts/slurm-deps || exit $$?; \
	set +e; PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests (exit 5): that is a failure here"; exit 1; fi; \
	exit $$rc

check: $(STAMP)
	@PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m coursekit.commands.quick_check $(CHECK_ARGS)

lab: $(STAMP)
	$(PY) -m coursekit.commands.lab --port $(LAB_PORT)

portfolio: $(STAMP)
	$(PY) -m coursekit.portfolio --records $(BUILD)/learner --out $(BUILD)/portfolio

mlflow-ui: $(STAMP)
	$(PY) -m coursekit.provenance ui

# the learner's traces (build/learner, where the notebooks write them), 127.0.0.1 only
xprof: $(STAMP)
	$(PY) -m coursekit.commands.xprof

# course-only {
bench: $(STAMP)
	$(PY) -m coursekit.commands.bench --out $(BUILD)/bench

# Not in CI (hours for all projects): Cosmic Ray mutates the learner regions of each
# solution, the project's checker is the oracle (build/mutants-<p>/report.json).
# MUTANTS_SAMPLE=N: N drawn mutants per stage, an estimate with its 95% interval.
# MUTANTS_STAGE=N: measure that stage again; the report keeps the others as last run.
# MUTANTS_RESCORE=1: no run; the last report decided again by the equivalents file.
mutants: $(STAMP)
	$(PY) -m coursekit.commands.mutants $(if $(MUTANTS_PROJECT),--project $(MUTANTS_PROJECT)) \
	  --jobs $(MUTANTS_JOBS) $(if $(MUTANTS_SAMPLE),--sample $(MUTANTS_SAMPLE)) \
	  $(if $(MUTANTS_STAGE),--stage $(MUTANTS_STAGE)) $(if $(MUTANTS_RESCORE),--rescore)

# Not in CI (slow): the learner-mistake corpus tests/mistakes/<p>.py and its blind part
# tests/mistakes/blind/<p>.py (MISTAKES_CORPUS=blind judges that part alone), each mistake
# judged by its stage's checker (build/mistakes-<p>/report.json); `make mutants` prints it
# beside its score.
mistakes: $(STAMP)
	$(PY) -m coursekit.commands.mistakes $(if $(MISTAKES_PROJECT),--project $(MISTAKES_PROJECT)) \
	  --jobs $(MISTAKES_JOBS) $(if $(MISTAKES_STAGE),--stage $(MISTAKES_STAGE)) \
	  --corpus $(MISTAKES_CORPUS) $(if $(MISTAKES_MATCH),--match $(MISTAKES_MATCH)) $(if $(MISTAKES_RESCORE),--rescore)

# Not in CI (too slow; CI keeps its 3-run test): failing seeds are printed to rerun.
flake: $(STAMP)
	$(PY) -m coursekit.commands.flake $(if $(FLAKE_PROJECT),--project $(FLAKE_PROJECT)) \
	  $(if $(FLAKE_STAGE),--stage $(FLAKE_STAGE)) --runs $(FLAKE_RUNS) --load $(FLAKE_LOAD) \
	  $(if $(FLAKE_IMPL),--impl $(FLAKE_IMPL))

starters: $(STAMP) $(FLOOR_STAMP)
	$(PY) -m coursekit.authoring.starters
	$(PY) -m coursekit.authoring.sealed
# } course-only

# build/learner holds the learner's own records (notebook runs, traces): never cleaned
clean:
	find $(BUILD) -mindepth 1 -maxdepth 1 ! -name learner -exec rm -rf {} + 2>/dev/null; \
	rm -rf .pytest_cache
