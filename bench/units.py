"""DynamoDB request units per message for send + pull + ack, from the sizes of the real items.

Runs the real engine on in-process moto and records every DynamoDB call with a botocore event hook:
the request, the response, and the size of every item written or read, by DynamoDB's item-size rules
(attribute names + values). Units are then what DynamoDB on-demand would bill:

- writes: ceil(item size / 1 KB) per item written; a replaced or updated item counts the larger of its
  old and new size; a transaction twice;
- reads: ceil(size / 4 KB) per item for GetItem/BatchGetItem (a missing item still costs one unit),
  ceil(sum of item sizes / 4 KB) per Query (at least one unit); eventually consistent reads half.

Prices: on-demand $0.625 per million write request units, $0.125 per million read request units.
Run: `python -m bench.units [--messages N] [--batch B] [--body-bytes S]`; import: `measure(...) -> dict`.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import random
import threading
from collections import defaultdict
from typing import Any

WRITE_PRICE_PER_MILLION = 0.625
READ_PRICE_PER_MILLION = 0.125
_WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


# --- DynamoDB item size ---------------------------------------------------------------------------------


def _number_size(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").lstrip("0") or "0"
    return math.ceil(len(digits.rstrip("0") or "0") / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    """Bytes of one low-level attribute value, by DynamoDB's rules."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return _number_size(v)
    if kind == "B":
        return len(v) if isinstance(v, bytes | bytearray) else len(base64.b64decode(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(value_size(x) + 1 for x in v)
    if kind == "SS":
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(_number_size(x) for x in v)
    if kind == "BS":
        return sum(len(x) for x in v)
    raise ValueError(kind)


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def _key_of(item_or_key: dict[str, Any]) -> tuple[str, str]:
    return item_or_key["pk"]["S"], item_or_key["sk"]["S"]


# --- the recorder ------------------------------------------------------------------------------------------


class Recorder:
    """Counts DynamoDB calls and request units per phase through botocore's event system."""

    def __init__(self, raw_client: Any) -> None:
        self._raw = raw_client  # an unhooked client, to learn an updated item's size
        self._local = threading.local()
        self.sizes: dict[tuple[str, tuple[str, str]], int] = {}
        self.phase = "setup"
        self.calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.wcu: dict[str, float] = defaultdict(float)
        self.rcu: dict[str, float] = defaultdict(float)
        self.items_written: dict[str, list[int]] = defaultdict(list)
        self.other_calls: dict[str, int] = defaultdict(int)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def attach_other(self, client: Any, service: str) -> None:
        def count(**_: Any) -> None:
            self.other_calls[f"{self.phase}:{service}"] += 1

        client.meta.events.register(f"after-call.{service}", count)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._local.params = params

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        op, params = model.name, getattr(self._local, "params", {})
        failed = "Error" in parsed
        self.calls[self.phase][op] += 1
        if failed and op not in _WRITE_OPS:
            return
        handler = getattr(self, f"_{op}", None)
        if handler is not None:
            handler(params, parsed, failed)

    # writes
    def _write(self, table: str, key: tuple[str, str], new_size: int) -> None:
        old = self.sizes.get((table, key), 0)
        self.wcu[self.phase] += max(1, math.ceil(max(old, new_size) / 1024))
        self.items_written[self.phase].append(new_size)
        self.sizes[(table, key)] = new_size

    def _PutItem(self, params: dict, parsed: dict, failed: bool) -> None:
        size = item_size(params["Item"])
        if failed:  # a failed condition still consumes the write
            self.wcu[self.phase] += max(1, math.ceil(size / 1024))
            return
        self._write(params["TableName"], _key_of(params["Item"]), size)

    def _UpdateItem(self, params: dict, parsed: dict, failed: bool) -> None:
        table, key = params["TableName"], _key_of(params["Key"])
        if failed:
            self.wcu[self.phase] += max(1, math.ceil(self.sizes.get((table, key), 1) / 1024))
            return
        item = self._raw.get_item(TableName=table, Key=params["Key"], ConsistentRead=True).get("Item", {})
        self._write(table, key, item_size(item))

    def _DeleteItem(self, params: dict, parsed: dict, failed: bool) -> None:
        table, key = params["TableName"], _key_of(params["Key"])
        self.wcu[self.phase] += max(1, math.ceil(self.sizes.pop((table, key), 0) / 1024))

    def _TransactWriteItems(self, params: dict, parsed: dict, failed: bool) -> None:
        for action in params["TransactItems"]:
            put = action.get("Put")
            if put:
                self.wcu[self.phase] += 2 * max(1, math.ceil(item_size(put["Item"]) / 1024))

    # reads
    def _read_units(self, size: int, consistent: bool) -> float:
        units = max(1, math.ceil(size / 4096))
        return units if consistent else units / 2

    def _GetItem(self, params: dict, parsed: dict, failed: bool) -> None:
        size = item_size(parsed.get("Item", {}))
        self.rcu[self.phase] += self._read_units(size, bool(params.get("ConsistentRead")))

    def _BatchGetItem(self, params: dict, parsed: dict, failed: bool) -> None:
        for table, request in params["RequestItems"].items():
            consistent = bool(request.get("ConsistentRead"))
            found = {_key_of(i): item_size(i) for i in parsed.get("Responses", {}).get(table, [])}
            for key in request["Keys"]:
                self.rcu[self.phase] += self._read_units(found.get(_key_of(key), 0), consistent)

    def _Query(self, params: dict, parsed: dict, failed: bool) -> None:
        size = sum(item_size(i) for i in parsed.get("Items", []))
        self.rcu[self.phase] += self._read_units(size, bool(params.get("ConsistentRead")))


# --- the measurement ---------------------------------------------------------------------------------------


def _bodies(count: int, size: int, rng: random.Random) -> list[bytes]:
    """Text bodies of `size` bytes: base64 of random bytes (about as compressible as real payloads)."""
    raw = math.ceil(size * 3 / 4) + 3
    return [base64.b64encode(rng.randbytes(raw))[:size] for _ in range(count)]


def measure(messages: int = 2_000, batch: int = 100, body_bytes: int = 200, seed: int = 7) -> dict[str, Any]:
    """Send, pull and ack `messages` at `batch` per call on a one-shard queue; units per message."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        os.environ.setdefault(name, value)
    from moto import mock_aws

    from sluice.adapters import aws
    from sluice.local.provision import provision
    from sluice.models import OutgoingMessage
    from sluice.service import Sluice

    rng = random.Random(seed)
    aws.reset_clients()
    try:
        with mock_aws():
            settings = provision(None, "bench")
            import boto3

            recorder = Recorder(boto3.client("dynamodb"))
            recorder.attach(aws.client("dynamodb", settings.aws_endpoint_url))
            recorder.attach_other(aws.client("ssm", settings.aws_endpoint_url), "ssm")
            mirror_cache: dict[str, str | None] = {}
            engine: Sluice

            def read_mirror(name: str, force: bool) -> str | None:  # the Lambda's cached SSM reader
                if force or name not in mirror_cache:
                    mirror_cache[name] = engine.backend.mirror.read(name)
                return mirror_cache[name]

            engine = Sluice.from_settings(settings, read_mirror)
            queue = "bench"
            engine.queues.create(queue)
            engine.consumer.pull(queue, group="default", batch_size=1)  # warm: caches, the group state
            bodies = _bodies(messages, body_bytes, rng)

            recorder.phase = "send"
            for start in range(0, messages, batch):
                chunk = [OutgoingMessage(body=b, content_type="text") for b in bodies[start : start + batch]]
                engine.publisher.publish(queue, chunk)
            received = 0
            leases: list[list[str]] = []
            recorder.phase = "pull"
            while received < messages:
                got = engine.consumer.pull(queue, group="default", batch_size=batch).messages
                if not got:
                    break
                received += len(got)
                leases.append([d.lease_id for d in got])
            recorder.phase = "ack"
            for chunk_leases in leases:
                engine.consumer.ack(queue, chunk_leases)
            recorder.phase = "done"
    finally:
        aws.reset_clients()

    phases = ("send", "pull", "ack")
    per_message = {
        p: {
            "wcu": recorder.wcu[p] / messages,
            "rcu": recorder.rcu[p] / messages,
            "calls": dict(recorder.calls[p]),
        }
        for p in phases
    }
    wcu = sum(recorder.wcu[p] for p in phases) / messages
    rcu = sum(recorder.rcu[p] for p in phases) / messages
    batch_items = [s for s in recorder.items_written["send"] if s > 1024]
    return {
        "messages": messages,
        "received": received,
        "batch": batch,
        "body_bytes": body_bytes,
        "per_message": per_message,
        "wcu_per_message": wcu,
        "rcu_per_message": rcu,
        "batch_item_bytes": int(sum(batch_items) / len(batch_items)) if batch_items else 0,
        "ssm_calls_steady_state": sum(
            v for k, v in recorder.other_calls.items() if not k.startswith("setup")
        ),
        "usd_per_million_messages": wcu * WRITE_PRICE_PER_MILLION + rcu * READ_PRICE_PER_MILLION,
        "usd_per_million_writes_part": wcu * WRITE_PRICE_PER_MILLION,
        "usd_per_million_reads_part": rcu * READ_PRICE_PER_MILLION,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"DynamoDB units per message: send + pull + ack, batch {result['batch']}, "
        f"{result['body_bytes']}-byte bodies, {result['messages']} messages "
        f"(batch item ≈ {result['batch_item_bytes']} bytes)",
        f"{'phase':<8}{'WCU/msg':>10}{'RCU/msg':>10}  calls per {result['messages']} messages",
    ]
    for phase, row in result["per_message"].items():
        calls = ", ".join(f"{op} {n}" for op, n in sorted(row["calls"].items()))
        lines.append(f"{phase:<8}{row['wcu']:>10.4f}{row['rcu']:>10.4f}  {calls}")
    lines.append(f"{'total':<8}{result['wcu_per_message']:>10.4f}{result['rcu_per_message']:>10.4f}")
    lines.append(
        f"cost per million messages at on-demand prices: ${result['usd_per_million_messages']:.4f} "
        f"(writes ${result['usd_per_million_writes_part']:.4f} + "
        f"reads ${result['usd_per_million_reads_part']:.4f}); "
        f"SSM calls in steady state: {result['ssm_calls_steady_state']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--body-bytes", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = measure(args.messages, args.batch, args.body_bytes)
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
