"""The engine for this Lambda container: built once, with the shard-map mirror cached by Powertools."""

from __future__ import annotations

from functools import lru_cache

from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from sluice.adapters import aws
from sluice.service import Sluice
from sluice.settings import get_settings


@lru_cache(maxsize=1)
def service() -> Sluice:
    settings = get_settings()
    provider = parameters.SSMProvider(boto3_client=aws.client("ssm", settings.aws_endpoint_url))
    backend_mirror_name = settings.shard_map_prefix.rstrip("/")

    def read_mirror(queue: str, force: bool) -> str | None:
        try:
            return provider.get(
                f"{backend_mirror_name}/{queue}",
                max_age=int(settings.shard_map_ttl_seconds),
                force_fetch=force,
            )
        except GetParameterError:
            return None

    return Sluice.from_settings(settings, read_mirror)
