"""Counting AWS calls and DynamoDB capacity units from the items the engine actually reads and writes.

A botocore event hook on every client the adapters make (`sluice.adapters.aws.instrument`) records
each call (service, operation) and the serialized items. Item sizes and units come from bench/units.py
(DynamoDB's documented rules); this module applies them per operation:

- write: ceil(size / 1 KB) WCU per item written; a PutItem or UpdateItem costs the larger of the old
  and the new item, a DeleteItem the old item, a failed conditional write the same as a successful
  one; TransactWriteItems costs twice that per item.
- read: ceil(size / 4 KB) RCU per item for GetItem and BatchGetItem (strongly consistent; half of it
  when eventually consistent), a Query sums the sizes of the items it returns and rounds once.
  An item that does not exist still costs 1 read unit (0.5 eventually consistent).

Old item sizes for PutItem/UpdateItem/DeleteItem come from a probe: a GetItem through a separate,
uninstrumented client just before the call (and after it, for UpdateItem's new item). Probes are not
counted and make the accounting run slow; timing is measured in a separate run without them.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.units import item_size, read_units, write_units
from sluice.engine.keys import MSG_SK_PREFIX
from sluice.segmentformat import SEGMENT_PREFIX

_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}


@dataclass
class Tally:
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    wcu: float = 0.0
    rcu: float = 0.0
    bytes_written: int = 0
    batch_item_bytes: int = 0  # batch items written (`M#...`): what the hot tier stores in DynamoDB
    object_bytes: int = 0  # S3 objects written outside segments (payload tier, overflow bodies)

    def add(self, other: Tally) -> None:
        self.calls.update(other.calls)
        self.wcu += other.wcu
        self.rcu += other.rcu
        self.bytes_written += other.bytes_written
        self.batch_item_bytes += other.batch_item_bytes
        self.object_bytes += other.object_bytes

    @property
    def call_count(self) -> int:
        return sum(self.calls.values())


class Accountant:
    """Attach with `start()`; read and reset `tally` around the work you want to price."""

    def __init__(self, probe_client: Any | None = None) -> None:
        self.tally = Tally()
        self._probe = probe_client
        self._local = threading.local()
        self._stop: Any = None
        self._clients: list[Any] = []

    def start(self) -> Accountant:
        from sluice.adapters import aws

        self._stop = aws.instrument(self.attach)
        return self

    def stop(self) -> None:
        if self._stop:
            self._stop()
        for client in self._clients:
            client.meta.events.unregister("before-parameter-build", unique_id=f"acct-before-{id(self)}")
            client.meta.events.unregister("after-call", unique_id=f"acct-after-{id(self)}")
        self._clients.clear()

    def reset(self) -> Tally:
        done, self.tally = self.tally, Tally()
        return done

    def attach(self, client: Any) -> None:
        client.meta.events.register(
            "before-parameter-build", self._before, unique_id=f"acct-before-{id(self)}"
        )
        client.meta.events.register("after-call", self._after, unique_id=f"acct-after-{id(self)}")
        self._clients.append(client)

    # --- hooks ----------------------------------------------------------------------------------------

    def _old_size(self, table: str, key: dict[str, Any]) -> int:
        if self._probe is None:
            return 0
        found = self._probe.get_item(TableName=table, Key=key, ConsistentRead=True)
        return item_size(found.get("Item"))

    def _before(self, model: Any, params: dict[str, Any], **_kwargs: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        self.tally.calls[(service, model.name)] += 1
        self._local.params = params
        if service == "s3" and model.name == "PutObject" and not params["Key"].startswith(SEGMENT_PREFIX):
            body = params.get("Body", b"")  # bytes here, or already a stream botocore made of them
            self.tally.object_bytes += len(body) if isinstance(body, bytes) else len(body.getbuffer())
        if service != "dynamodb" or model.name not in _WRITES:
            self._local.old = 0
            return
        key = params.get("Key") or {k: params["Item"][k] for k in ("pk", "sk")}
        self._local.old = self._old_size(params["TableName"], key)
        self._local.key = (params["TableName"], key)

    def _after(self, model: Any, parsed: Any = None, **_kwargs: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        op = model.name
        if service != "dynamodb":
            return
        parsed = parsed or {}
        if op == "PutItem":
            new = item_size(self._last_params.get("Item"))
            self._write(max(new, self._local.old), new)
            if self._last_params["Item"]["sk"].get("S", "").startswith(MSG_SK_PREFIX):
                self.tally.batch_item_bytes += new
        elif op == "UpdateItem":
            table, key = self._local.key
            new = self._old_size(table, key)
            self._write(max(new, self._local.old), new)
        elif op == "DeleteItem":
            self._write(self._local.old, 0)
        elif op == "TransactWriteItems":
            for action in self._last_params.get("TransactItems", []):
                for body in action.values():
                    size = item_size(body.get("Item")) if "Item" in body else 0
                    self._write(2 * write_units(size) * 1024, size)
        elif op == "BatchWriteItem":
            for requests in self._last_params.get("RequestItems", {}).values():
                for r in requests:
                    size = item_size(r.get("PutRequest", {}).get("Item"))
                    self._write(size, size)
        elif op == "GetItem":
            self.tally.rcu += read_units(
                item_size(parsed.get("Item")), self._last_params.get("ConsistentRead", False)
            )
        elif op == "BatchGetItem":
            asked = self._last_params.get("RequestItems", {})
            for table, items in parsed.get("Responses", {}).items():
                consistent = asked.get(table, {}).get("ConsistentRead", False)
                missing = len(asked.get(table, {}).get("Keys", [])) - len(items)
                self.tally.rcu += sum(read_units(item_size(i), consistent) for i in items)
                self.tally.rcu += max(0, missing) * read_units(0, consistent)
        elif op == "Query":
            size = sum(item_size(i) for i in parsed.get("Items", []))
            self.tally.rcu += read_units(size, self._last_params.get("ConsistentRead", False))

    def _write(self, billed_size: int, new_size: int) -> None:
        self.tally.wcu += write_units(billed_size)
        self.tally.bytes_written += new_size

    @property
    def _last_params(self) -> dict[str, Any]:
        """The API parameters of this thread's call in flight (after-call does not carry them)."""
        return getattr(self._local, "params", {})
