# statekeeper developer entry points. Everything runs from the project venv (.venv).
#   make venv    create .venv and install the project with its test and dev extras (idempotent)
#   make demo    start the embedded Temporal server + worker in the background, run the 20 dev
#                τ-bench tasks offline, print the summary and the Web UI URL
#   make stop    stop the background server and webhook listener started by make demo (`statekeeper stop` does so
#                from any directory: the server records itself in the dev state file)
#   make check   the fast tiers: pure core and activities (tests/core, tests/activities), under 3 minutes
#   make test    the whole suite (three processes: TEST_WORKERS=0 for one); what CI runs
#   make bench   prompt-size, write-path and turns (--quick) benchmarks, then the τ-bench runner with a JSON report
#   make clean   build/test caches; make distclean also removes .venv and local data

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEMO_TASKS ?= systems/retail/data/tasks_dev.json
BENCH_TASKS ?= systems/retail/data/tasks_dev.json
BENCH_CONCURRENCY ?= 8
BENCH_REPORT ?= bench/taubench-report.json
# Same defaults as settings/__init__.py; make sees STATEKEEPER_* from the environment.
STATEKEEPER_UI_PORT ?= 8233
STATEKEEPER_TEMPORAL_NAMESPACE ?= default
UI_URL ?= http://127.0.0.1:$(STATEKEEPER_UI_PORT)/namespaces/$(STATEKEEPER_TEMPORAL_NAMESPACE)/workflows

.PHONY: venv demo stop check test bench clean distclean

venv: $(STAMP)

# The stamp depends on pyproject.toml: a changed dependency list reinstalls, nothing else does.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -e '.[test,dev]'
	touch $(STAMP)

# Starts the embedded Temporal dev server (Web UI) and a worker in the background
# (`statekeeper dev --detach`, kept running so the Web UI can be browsed afterwards;
# `make stop` ends it), then runs the τ-bench tasks with one more in-process worker on the
# same system of record (its data directory). Both check the server first: missing search
# attributes are registered, and a task queue served by another database is refused.
# A local webhook receiver (`statekeeper webhooks listen --detach`) registers a webhook for every
# event, verifies each delivery's signature, and taubench's summary counts what it verified.
demo: venv
	@echo "statekeeper demo: τ-bench tasks from $(DEMO_TASKS), offline stand-in model unless ANTHROPIC_API_KEY is set"
	$(BIN)/statekeeper dev --detach
	$(BIN)/statekeeper webhooks listen --detach --port 0
	$(BIN)/statekeeper taubench --tasks $(DEMO_TASKS) --concurrency $(BENCH_CONCURRENCY)
	@echo "Temporal Web UI: $(UI_URL)  (still running; stop it with 'make stop')"

stop: venv
	$(BIN)/statekeeper stop

# Three test processes, each with its own Temporal dev server and PostgreSQL database, one test
# file at a time (a file's module fixtures are set up once): most tests wait on servers and
# timers, not the CPU, so three keep a 2-core machine busy. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3

check: venv
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile tests/core tests/activities

test: venv
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: venv
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/write_path.py
	$(BIN)/python bench/turns.py --quick
	@mkdir -p $(dir $(BENCH_REPORT))
	$(BIN)/statekeeper taubench --tasks $(BENCH_TASKS) --concurrency $(BENCH_CONCURRENCY) --json $(BENCH_REPORT)

clean:
	rm -rf build dist site *.egg-info .pytest_cache
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .statekeeper
