# Sluice: `make demo` runs the main job on the local runtime, `make test` the whole suite.
# Both install what they need first (uv, then the locked dependencies) on a fresh machine.

PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
RUN := $(UV) run --frozen
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: install demo test test-spark-glue6 lint format bench

install: .venv/.installed

.venv/.installed: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q uv
	$(UV) sync --frozen
	@touch $@

demo: install
	$(RUN) python -m sluice.demo --consumer spark

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy sluice lambdas glue_jobs stacks bench

format: install
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

# The main venv (Python 3.11, as in CI) runs the whole suite with Glue 5.0's runtime (Spark 3.5, see the
# `spark` group in pyproject.toml); tests/spark runs again on Glue 6.0's (Spark 4.1, Python 3.13).
# SLUICE_IAM_UNUSED_CHECK: the whole suite's AWS calls also judge the roles the other way round: a granted
# action no call used fails the run (tests/conftest.py, sluice/local/iamcheck.py).
test: lint
	SLUICE_IAM_UNUSED_CHECK=1 $(RUN) pytest -q -p no:cacheprovider --timeout=900
	$(MAKE) test-spark-glue6

# A second venv from the same lock on Python 3.13 (pyenv's if there is one; uv finds or fetches it
# otherwise), without the CDK group: ≈ 50 s the first time, then nothing until pyproject/uv.lock change.
GLUE6_VENV := .venv-glue6
GLUE6_PYTHON ?= $(or $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13)),3.13)

$(GLUE6_VENV)/.installed: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q uv
	UV_PROJECT_ENVIRONMENT=$(GLUE6_VENV) $(UV) sync --frozen --python $(GLUE6_PYTHON) --no-group infra
	@touch $@

test-spark-glue6: $(GLUE6_VENV)/.installed
	$(GLUE6_VENV)/bin/python -m pytest -q -p no:cacheprovider --timeout=900 tests/spark

-include mk/*.mk
