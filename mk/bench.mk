# `make bench`: calls, capacity units and cost per message, handler CPU, cold import, local msg/s.
# Writes docs/performance.md and docs/img/cost.png, and prints the tables; then the cost at rest
# (bench/rest.py) and the DynamoDB twin's
# scenarios (bench/twin) replace their own section of docs/performance.md and write docs/img/twin-*.png.
bench: install
	$(RUN) python -m bench
	$(RUN) python -m bench.rest
	$(RUN) python -m bench.twin
