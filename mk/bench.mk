# `make bench`: calls, capacity units and cost per message, handler CPU, cold import, local msg/s.
# Writes docs/performance.md and docs/img/cost.png, and prints the tables.
bench: install
	$(RUN) python -m bench
