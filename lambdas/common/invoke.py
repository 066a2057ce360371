"""Starting other functions without waiting: Lambda `Invoke` with InvocationType=Event.

The local runtime serves the same Invoke API on its HTTP port (`Settings.lambda_endpoint_url`) and runs
the event on its function pools, so the coordinator uses one code path in AWS and locally."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from lambdas.common.observability import correlation_id, logger
from sluice.adapters import aws
from sluice.events import CORRELATION_KEY


class LambdaInvoker:
    def __init__(self, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url

    def invoke_async(self, function: str, event: dict[str, Any]) -> None:
        """Fire and forget, carrying this invocation's correlation id; a failure is logged, the
        coordinator's next pass tries again."""
        sender = correlation_id()
        payload = {**event, CORRELATION_KEY: sender} if sender else event
        try:
            aws.client("lambda", self.endpoint_url).invoke(
                FunctionName=function, InvocationType="Event", Payload=json.dumps(payload).encode()
            )
        except (ClientError, BotoCoreError) as exc:
            logger.warning("could not start %s: %s", function, exc)
