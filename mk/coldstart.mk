# `make bench` measures handler import time (bench/coldstart.py) on Lambda's Python, 3.12: a venv from the
# lock with the runtime dependencies only (boto3, pydantic, Powertools), as the Lambda runtime + layer
# provide them. pyenv's 3.12 if there is one; uv finds or fetches it otherwise. Seconds once, then
# nothing until pyproject/uv.lock change.
LAMBDA_VENV := .venv-lambda312
LAMBDA_PYTHON ?= $(or $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.12*/bin/python3.12)),3.12)

$(LAMBDA_VENV)/.installed: pyproject.toml uv.lock
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install -q uv
	UV_PROJECT_ENVIRONMENT=$(LAMBDA_VENV) $(UV) sync --frozen --python $(LAMBDA_PYTHON) --no-default-groups --no-install-project
	@touch $@

bench: $(LAMBDA_VENV)/.installed
