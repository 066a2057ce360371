# The npm tools the suite runs against `sluice local`, pinned by conformance/package-lock.json: the open
# Durable Streams server conformance suite (tests/e2e/test_open_streams_conformance.py), the npm
# `cloudflare` SDK's generations (tests/e2e/test_cloudflare_npm_sdk.py), `@durable-streams/client`, and
# the AWS SDK for JavaScript v3's SQS client with `sqs-consumer` (tests/e2e/test_sqs_clients.py).
# `make test` installs them first.

CONFORMANCE_DIR := conformance

test: $(CONFORMANCE_DIR)/node_modules/.installed

$(CONFORMANCE_DIR)/node_modules/.installed: $(CONFORMANCE_DIR)/package.json $(CONFORMANCE_DIR)/package-lock.json
	cd $(CONFORMANCE_DIR) && timeout 600 npm ci --no-audit --no-fund
	@touch $@

.PHONY: conformance
conformance: install $(CONFORMANCE_DIR)/node_modules/.installed
	$(RUN) pytest -q -p no:cacheprovider tests/e2e/test_open_streams_conformance.py
