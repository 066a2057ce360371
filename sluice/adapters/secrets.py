"""One Secrets Manager secret: read its current value (cached for a TTL) and write a new version.

Lambdas read through Powertools' SecretsProvider instead (`lambdas/common/runtime.py`); this reader
serves the CLI, the tests and anything else that builds the engine without Powertools.
"""

from __future__ import annotations

import threading
import time

from sluice import errors
from sluice.adapters import aws


class Secret:
    def __init__(self, secret_id: str | None, endpoint_url: str | None = None, ttl_seconds: float = 60.0):
        self.secret_id = secret_id
        self._endpoint_url = endpoint_url
        self._ttl = ttl_seconds
        self._lock = threading.Lock()
        self._cached: tuple[float, str] | None = None

    def _id(self) -> str:
        if not self.secret_id:
            raise errors.DependencyUnavailable("no lease-key secret is configured (SLUICE_LEASE_KEY_SECRET)")
        return self.secret_id

    def read(self, force: bool = False) -> str:
        with self._lock:
            if not force and self._cached and time.monotonic() < self._cached[0]:
                return self._cached[1]
        with aws.translated("Secrets Manager"):
            value = aws.client("secretsmanager", self._endpoint_url).get_secret_value(SecretId=self._id())
        with self._lock:
            self._cached = (time.monotonic() + self._ttl, value["SecretString"])
        return value["SecretString"]

    def write(self, value: str) -> None:
        """A new version, labelled AWSCURRENT (the old one becomes AWSPREVIOUS)."""
        with aws.translated("Secrets Manager"):
            aws.client("secretsmanager", self._endpoint_url).put_secret_value(
                SecretId=self._id(), SecretString=value
            )
        with self._lock:
            self._cached = None
