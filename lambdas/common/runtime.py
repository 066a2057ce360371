"""The engine for this Lambda container: built once. Queue documents are kept by the engine's
`QueueDirectory` for the container's life (read from SSM once, refreshed only when a HEAD item says the
map changed: no polling); the lease-signing keys are cached by Powertools (SecretsProvider)."""

from __future__ import annotations

from functools import lru_cache

from lambdas.common.invoke import LambdaInvoker
from sluice import errors
from sluice.adapters import aws
from sluice.service import Sluice
from sluice.settings import get_settings


@lru_cache(maxsize=1)
def service() -> Sluice:
    # Imported here, not at module level: Powertools parameters imports boto3 (and s3transfer), which
    # the handler's import need not pay for (SnapStart's before-snapshot hook imports it, restore.py).
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    settings = get_settings()
    secrets = parameters.SecretsProvider(boto3_client=aws.client("secretsmanager", settings.aws_endpoint_url))

    def read_lease_keys(force: bool) -> str:
        if not settings.lease_key_secret:
            raise errors.DependencyUnavailable("no lease-key secret is configured (SLUICE_LEASE_KEY_SECRET)")
        try:
            value = secrets.get(
                settings.lease_key_secret,
                max_age=int(settings.lease_key_cache_ttl_seconds),
                force_fetch=force,
            )
        except GetParameterError as exc:
            raise errors.DependencyUnavailable("the lease-key secret could not be read; retry") from exc
        assert isinstance(value, str)  # SecretString: the stack never stores a binary secret here
        return value

    invoker = LambdaInvoker(settings.lambda_endpoint_url)  # wakes the coordinator when shards throttle
    return Sluice.from_settings(settings, read_lease_keys=read_lease_keys, invoker=invoker)
