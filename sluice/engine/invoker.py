"""Starting another function without waiting: what the coordinator and a throttled broker need."""

from __future__ import annotations

from typing import Any, Protocol


class Invoker(Protocol):
    """Lambda InvocationType=Event (`lambdas.common.invoke.LambdaInvoker`; the local runtime's pools)."""

    def invoke_async(self, function: str, event: dict[str, Any]) -> None: ...
