# The open Durable Streams server conformance suite (npm, pinned by conformance/package-lock.json).
# `make test` installs it first; tests/e2e/test_open_streams_conformance.py runs it against `sluice local`.

CONFORMANCE_DIR := conformance

test: $(CONFORMANCE_DIR)/node_modules/.installed

$(CONFORMANCE_DIR)/node_modules/.installed: $(CONFORMANCE_DIR)/package.json $(CONFORMANCE_DIR)/package-lock.json
	cd $(CONFORMANCE_DIR) && timeout 600 npm ci --no-audit --no-fund
	@touch $@

.PHONY: conformance
conformance: install $(CONFORMANCE_DIR)/node_modules/.installed
	$(RUN) pytest -q -p no:cacheprovider tests/e2e/test_open_streams_conformance.py
