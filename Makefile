# barriersim: `make run` runs the default scenario end to end; `make test` runs the whole suite.
# Both create .venv if absent, install the project with every extra and the test tools, at the exact versions
# of constraints.txt (pyproject.toml declares the ranges), and make sure Java 17 is there (Spark needs it);
# `make test` also makes sure Debian's Chromium is there (the report's browser test loads the report in it).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SCENARIO ?= scenarios/quickstart.toml
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-serial test-loaded lint bench setup java chromium clean flink-venv flink-remeasure

setup: $(STAMP) java

$(STAMP): pyproject.toml setup.py constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# PYTHONWARNINGS: only setuptools' notice that an editable install uses an import hook (informational)
	PYTHONWARNINGS='ignore:Editable installation.' $(PY) -m pip install --quiet -c constraints.txt -e '.[all,test]'
	@touch $(STAMP)

java:
	@if ! command -v java >/dev/null 2>&1; then \
		echo "java not found: installing openjdk-17-jre-headless"; \
		$(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q openjdk-17-jre-headless; \
	fi
	@java -version 2>&1 | head -1

# quiet when present
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "chromium not found: installing Debian's chromium (the report's browser test)"; \
		$(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	fi

run: setup
	$(VENV)/bin/barriersim run $(SCENARIO)

# Two pytest processes at once (2 cores): the tests that start Ray or Spark in one, in order, one Ray at a time as
# ever; every other test in the other, at a lower priority (the Ray tests wait on processes starting; the others
# take the CPU they leave), its output printed after the first's (and kept in build/). Each process has its own
# session (tests/conftest.py: its own workload cache). `make test-serial` runs them all in one process.
OTHER_TESTS_LOG := build/tests-without-ray.log
test: setup chromium lint
	@mkdir -p build
	@nice -n 10 $(PY) -m pytest -m "not ray and not spark" > $(OTHER_TESTS_LOG) 2>&1 & other=$$!; \
	$(PY) -m pytest -m "ray or spark"; ray=$$?; \
	wait $$other; rest=$$?; \
	echo "--- the tests without Ray or Spark, run beside them ($(OTHER_TESTS_LOG)):"; cat $(OTHER_TESTS_LOG); \
	echo "--- Ray and Spark tests: exit $$ray; the others: exit $$rest"; \
	test $$ray -eq 0 && test $$rest -eq 0

test-serial: setup chromium lint
	$(PY) -m pytest

# `make test` with one busy process per core beside it: the suite must pass on a loaded machine too (CONTRIBUTING).
# The busy loops end with it, also when it is interrupted.
test-loaded:
	@pids=""; for i in $$(seq $$(nproc)); do ( while :; do :; done ) & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	echo "make test beside $$(nproc) busy loops"; $(MAKE) test

# ruff (lint, format) and mypy, configured in pyproject.toml. mypy checks the installed layout (runtime/, actors/,
# scenarios/ as subpackages of barriersim, see setup.py) through a tree of links rebuilt in build/typecheck/,
# because it cannot follow the import hook of an editable install.
TYPECHECK := build/typecheck
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/barriersim
	@for f in barriersim/*; do case $$f in */__pycache__) ;; *) ln -s ../../../$$f $(TYPECHECK)/barriersim/ ;; esac; done
	@for p in runtime actors scenarios; do ln -s ../../../$$p $(TYPECHECK)/barriersim/$$p; done
	@ln -s ../../benchmarks $(TYPECHECK)/benchmarks
	$(VENV)/bin/mypy

bench: setup
	$(PY) -m benchmarks.alignment_latency
	$(PY) -m benchmarks.state_size
	$(PY) -m benchmarks.simulator
	$(PY) -m benchmarks.ray_pipeline
	$(PY) -m benchmarks.placement
	$(PY) -m benchmarks.warm_run

# Flink 2.3.0 itself, for benchmarks/flink_remeasure.py (not needed by run, test or bench): PyFlink in its own
# venv, since it pins its own versions of pyarrow, numpy and others; thread mode embeds this Python (PEMJA), which
# needs a shared libpython (python3.11 from pyenv or Debian has one).
FLINK_VENV := .venv-flink
flink-venv: $(FLINK_VENV)/.installed java

$(FLINK_VENV)/.installed: constraints-flink.txt
	@test -x $(FLINK_VENV)/bin/python || $(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install --quiet -c constraints-flink.txt apache-flink==2.3.0
	@touch $@

flink-remeasure: setup flink-venv
	$(PY) -m benchmarks.flink_remeasure

clean:
	rm -rf $(VENV) $(FLINK_VENV) runs .pytest_cache .hypothesis
