"""SnapStart hooks of the HTTP functions (broker, consumer): what one snapshot must not hand to every
environment resumed from it, and what the snapshot should already hold.

- After restore: re-seed `random` (it picks the shard a send goes to and the shards a pull samples;
  restored from one snapshot, every environment would draw the same sequence and pile onto the same
  shards), and drop the cached AWS clients and the engine (its connections, the credentials of the
  snapshotted environment, the token cache, the shard-map and lease-key caches of Powertools'
  providers). Ids that must be unique come from `secrets`/`uuid4` (the kernel's CSPRNG, fresh in
  each environment) and lease ids are signed, so neither needs a hook.
- Before the snapshot: import what the handler imports lazily (Powertools parameters; idempotency on
  the broker), so a restored environment does not pay for it on its first request.
"""

from __future__ import annotations

import importlib
import random

from lambdas.common import runtime, snapstart
from sluice.adapters import aws

# Imported lazily by the handlers (their cold start without SnapStart), eagerly into the snapshot.
SNAPSHOT_IMPORTS = ("aws_lambda_powertools.utilities.parameters",)


def import_for_snapshot(*modules: str) -> None:
    for module in (*SNAPSHOT_IMPORTS, *modules):
        importlib.import_module(module)


def reseed_random() -> None:
    random.seed()  # from os.urandom: different in every restored environment


def drop_shared_state() -> None:
    runtime.service.cache_clear()
    aws.reset_clients()


snapstart.register_before_snapshot(import_for_snapshot)
snapstart.register_after_restore(reseed_random)
snapstart.register_after_restore(drop_shared_state)
