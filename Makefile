# Sluice: `make demo` runs the main job on the local runtime, `make test` the whole suite.
# Both install what they need first (uv, then the locked dependencies) on a fresh machine.

PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
RUN := $(UV) run --frozen
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: install demo test lint format bench

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

format: install
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

test: lint
	$(RUN) pytest -q -p no:cacheprovider --timeout=900

-include mk/*.mk
