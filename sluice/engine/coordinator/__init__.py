"""The coordinator: scaling, sealing, shard-map publish, push workers and shard work, one owner at a time.

- `run`: the pass (`Coordinator`), fenced by the ownership item.
- `observe`: what a pass sees (rates, drained/flushed shards, backlog, oldest message).
- `state`: what it keeps between passes (built once per pass, written once).
- `dispatch`: push workers and shard work started elsewhere.
- `config`, `reports`: its configuration and what it reports.
"""

from sluice.engine.coordinator.config import CoordinatorConfig, Invoker
from sluice.engine.coordinator.observe import shard_is_flushed
from sluice.engine.coordinator.reports import QueueReport, RunReport
from sluice.engine.coordinator.run import MIRROR_CHECK_EVERY_MS, Coordinator

__all__ = [
    "MIRROR_CHECK_EVERY_MS",
    "Coordinator",
    "CoordinatorConfig",
    "Invoker",
    "QueueReport",
    "RunReport",
    "shard_is_flushed",
]
