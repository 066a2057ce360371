"""The engine assembled: one object per process that handlers, the CLI, jobs and tests call into."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from sluice.engine.accesskeys import AccessKeys
from sluice.engine.auth import TokenStore
from sluice.engine.backend import Backend
from sluice.engine.clock import SYSTEM, Clock
from sluice.engine.consume import Consumer
from sluice.engine.durable import DurableStreams
from sluice.engine.groups import ConsumerGroups
from sluice.engine.invoker import Invoker
from sluice.engine.openstreams import OpenStreams
from sluice.engine.operations import Operations
from sluice.engine.publish import Publisher
from sluice.engine.push import ConsumerStore, Pusher
from sluice.engine.queues import MirrorReader, QueueDirectory, QueueRegistry
from sluice.engine.shardwork import ShardWorker
from sluice.engine.streams import StreamReader
from sluice.engine.wake import Waker
from sluice.leases import KeyringSource, LeaseSigner
from sluice.settings import Settings
from sluice.webhooks import WebhookSigner


class Sluice:
    """Wires the engine parts over one Backend.

    Queue documents are read from the SSM mirror (`read_mirror`, default the backend's) and kept by the
    directory for the life of the object (sluice/engine/queues.py `QueueDirectory`). `read_lease_keys(force)`
    reads the lease-key secret: Lambdas pass Powertools' SecretsProvider; without one, the backend's
    own reader (cached for `lease_key_cache_ttl_seconds`).
    """

    def __init__(
        self,
        backend: Backend,
        read_mirror: MirrorReader | None = None,
        read_lease_keys: Callable[[bool], str] | None = None,
        invoker: Invoker | None = None,
    ) -> None:
        self.backend = backend
        self._read_mirror = read_mirror
        self._read_lease_keys = read_lease_keys or backend.lease_secret.read
        self.invoker = invoker  # starts other functions (Lambda Event invokes): the throttle wake

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        read_mirror: MirrorReader | None = None,
        clock: Clock | Callable[[], int] = SYSTEM,
        read_lease_keys: Callable[[bool], str] | None = None,
        invoker: Invoker | None = None,
    ) -> Sluice:
        return cls(Backend.from_settings(settings, clock), read_mirror, read_lease_keys, invoker)

    @cached_property
    def queues(self) -> QueueRegistry:
        return QueueRegistry(self.backend)

    @cached_property
    def directory(self) -> QueueDirectory:
        return QueueDirectory(self.queues, self._read_mirror)

    @cached_property
    def publisher(self) -> Publisher:
        return Publisher(self.backend, self.directory, self.waker)

    @cached_property
    def waker(self) -> Waker:
        return Waker(self.backend, self.invoker, self.backend.settings.coordinator_function)

    @cached_property
    def lease_keys(self) -> KeyringSource:
        return KeyringSource(self._read_lease_keys)

    @cached_property
    def consumer(self) -> Consumer:
        signer = LeaseSigner(self.lease_keys, self.backend.clock)
        return Consumer(self.backend, self.directory, self.publisher, signer)

    @cached_property
    def access_keys(self) -> AccessKeys:
        """SQS access keys; their secrets derive from the lease keys' access root (engine/accesskeys.py)."""
        return AccessKeys(self.backend, self.lease_keys, self.backend.settings.token_cache_ttl_seconds)

    @cached_property
    def webhook_signer(self) -> WebhookSigner:
        """Signs push deliveries to webhooks; its keys derive from the lease keys (sluice/webhooks.py)."""
        return WebhookSigner(self.lease_keys, self.backend.clock)

    @cached_property
    def reader(self) -> StreamReader:
        return StreamReader(self.backend, self.directory, self.queues)

    @cached_property
    def streams(self) -> DurableStreams:
        return DurableStreams(self.backend, self.queues, self.publisher, self.reader)

    @cached_property
    def open_streams(self) -> OpenStreams:
        return OpenStreams(self.backend, self.queues, self.publisher, self.reader)

    @cached_property
    def shard_worker(self) -> ShardWorker:
        return ShardWorker(self.backend, self.queues)

    @cached_property
    def tokens(self) -> TokenStore:
        return TokenStore(self.backend, self.backend.settings.token_cache_ttl_seconds)

    @cached_property
    def groups(self) -> ConsumerGroups:
        return ConsumerGroups(self.backend, self.queues)

    @cached_property
    def operations(self) -> Operations:
        return Operations(self.backend, self.queues, self.publisher, self.consumer)

    @cached_property
    def push_consumers(self) -> ConsumerStore:
        return ConsumerStore(self.backend)

    @cached_property
    def pusher(self) -> Pusher:
        return Pusher(self.backend, self.queues, self.consumer)
