"""Starting other functions without waiting: Lambda `Invoke` with InvocationType=Event.

The local runtime serves the same Invoke API on its HTTP port (`SLUICE_LAMBDA_ENDPOINT_URL`) and runs
the event on its function pools, so the coordinator uses one code path in AWS and locally."""

from __future__ import annotations

import json
import os
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from sluice import constants as c
from sluice.adapters import aws

logger = Logger(child=True)


class LambdaInvoker:
    def __init__(self, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url or os.environ.get(c.ENV_LAMBDA_ENDPOINT_URL) or None

    def invoke_async(self, function: str, event: dict[str, Any]) -> None:
        """Fire and forget; a failure is logged, the coordinator's next pass tries again."""
        try:
            aws.client("lambda", self.endpoint_url).invoke(
                FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
            )
        except (ClientError, BotoCoreError) as exc:
            logger.warning("could not start %s: %s", function, exc)
