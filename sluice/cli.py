"""The `sluice` command: the local runtime, tokens, and queue operations over the HTTP API.

HTTP commands read `SLUICE_URL` (default http://127.0.0.1:8787) and `SLUICE_TOKEN`, or --url/--token,
and print readable lines, or with --json one compact JSON document (tail, and pull without --json:
one JSON line per message).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from sluice import constants as c

DEFAULT_URL = "http://127.0.0.1:8787"


def _client(args: argparse.Namespace):
    from sluice.client import SluiceClient

    token = args.token or os.environ.get("SLUICE_TOKEN")
    if not token:
        sys.exit("sluice: no token; pass --token or set SLUICE_TOKEN")
    return SluiceClient(args.url or os.environ.get("SLUICE_URL", DEFAULT_URL), token)


def _emit(args: argparse.Namespace, value: Any) -> None:
    """`--json`: one compact JSON document for scripts; else a readable rendering."""
    if getattr(args, "json", False):
        print(json.dumps(value, sort_keys=True, separators=(",", ":")))
    elif isinstance(value, list):
        for item in value:
            print(_line(item))
    elif isinstance(value, dict):
        width = max((len(k) for k in value), default=0)
        for key, item in value.items():
            print(f"{key:<{width}}  {_line(item)}")
    elif value is not None:
        print(value)


def _line(value: Any) -> str:
    if isinstance(value, dict):
        return "  ".join(
            f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}" for k, v in value.items()
        )
    return value if isinstance(value, str) else json.dumps(value)


def _bar(args: argparse.Namespace, total: int | None, unit: str):
    """A tqdm progress bar on stderr, off with --quiet or --json (scripts) and when stderr is no tty."""
    from tqdm import tqdm

    off = args.quiet or getattr(args, "json", False)
    return tqdm(total=total, unit=unit, disable=True if off else None, file=sys.stderr)


# --- lease key ------------------------------------------------------------------------------------------


def cmd_lease_key_rotate(args: argparse.Namespace) -> None:
    """New lease-signing key in the stack's secret (SLUICE_LEASE_KEY_SECRET, or --secret-id); the old
    one keeps verifying for one visibility period. Uses the caller's AWS credentials."""
    from sluice.adapters.secrets import Secret
    from sluice.engine.auth import rotate_lease_key
    from sluice.engine.clock import wall_ms as now_ms

    secret_id = args.secret_id or os.environ.get(c.ENV_LEASE_KEY_SECRET)
    if not secret_id:
        sys.exit(f"sluice: pass --secret-id or set {c.ENV_LEASE_KEY_SECRET} (the stack's LeaseKeySecretArn)")
    ring = rotate_lease_key(Secret(secret_id, os.environ.get(c.ENV_AWS_ENDPOINT_URL)), now_ms())
    _emit(
        args, {"current_id": ring.current_id, "previous_id": ring.previous_id, "retired_ms": ring.retired_ms}
    )


# --- local ----------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> None:
    from sluice.local.runtime import LocalRuntime, run_until_signalled

    admin_token = args.admin_token or os.environ.get(c.ENV_ADMIN_TOKEN)
    if not admin_token:
        import secrets

        admin_token = "sluice_local_" + secrets.token_urlsafe(16)
        print(f"admin token: {admin_token}", file=sys.stderr, flush=True)
    open_prefix = args.open_stream_prefix or os.environ.get(c.ENV_OPEN_STREAM_PREFIX, "")
    extra_env = {c.ENV_OPEN_STREAM_PREFIX: open_prefix} if open_prefix else {}
    context = _context(args.context)
    if args.regions:
        from sluice.local.regions import MultiRegionRuntime, parse_regions

        try:
            regions = parse_regions(args.regions)
        except ValueError as exc:
            sys.exit(f"sluice: --regions: {exc}")
        deployment = MultiRegionRuntime(
            regions,
            host=args.host,
            port=args.port,
            admin_token=admin_token,
            time_scale=args.time_scale,
            inter_region_delay_ms=args.inter_region_delay_ms,
            replication_lag_ms=args.replication_lag_ms,
            extra_env=extra_env,
            context=context,
        )

        def ready() -> None:
            print("sluice local ready on " + " ".join(f"{u} ({r})" for u, r in deployment.urls), flush=True)
            print(f"console: {deployment.urls[0][0]}{c.CONSOLE_PATH}", file=sys.stderr, flush=True)

        run_until_signalled(deployment, ready)
        return
    runtime = LocalRuntime(
        host=args.host,
        port=args.port,
        admin_token=admin_token,
        time_scale=args.time_scale,
        extra_env=extra_env,
        template=_local_template(context) if context else None,
    )

    def ready_one() -> None:
        print(f"sluice local ready on {runtime.url}", flush=True)
        print(f"console: {runtime.url}{c.CONSOLE_PATH}", file=sys.stderr, flush=True)

    run_until_signalled(runtime, ready_one)


def _context(pairs: list[str]) -> dict[str, str]:
    """`-c KEY=VALUE` pairs, as `cdk deploy -c` takes them."""
    bad = [pair for pair in pairs if "=" not in pair]
    if bad:
        sys.exit(f"sluice: -c takes KEY=VALUE (as cdk deploy -c), not {bad[0]!r}")
    return dict(pair.split("=", 1) for pair in pairs)


def _local_template(context: dict[str, str]) -> dict[str, Any]:
    """The template the stack synthesizes with `context` (a bad value stops here, as `cdk synth` would)."""
    from sluice.local.template import TemplateUnavailable, load_template

    try:
        return load_template(context)
    except (TemplateUnavailable, ValueError) as exc:  # ValueError: the stack's config refused a value
        sys.exit(f"sluice: -c: {exc}")


# --- tokens ---------------------------------------------------------------------------------------------


def cmd_token_create(args: argparse.Namespace) -> None:
    """With an admin SLUICE_TOKEN: over HTTP. Without one (the first token): straight into the control
    table named by SLUICE_CONTROL_TABLE etc., with the caller's AWS credentials."""
    if args.token or os.environ.get("SLUICE_TOKEN"):
        client = _client(args)
        created = client.create_token(args.queue, args.scope, args.expires_in)
        if args.sqs:
            created |= client.issue_access_key(created["token_id"])
        _emit(args, created)
        return
    from sluice.service import Sluice
    from sluice.settings import Settings

    try:
        settings = Settings.from_env()
    except ValueError:
        sys.exit(
            "sluice: set SLUICE_TOKEN to an admin token, or the stack's environment ("
            f"{c.ENV_CONTROL_TABLE}, {c.ENV_SHARD_TABLES}, {c.ENV_SEGMENT_BUCKET}, {c.ENV_SHARD_MAP_PREFIX}"
            "); see docs/deploy.md"
        )
    engine = Sluice.from_settings(settings)
    expires = None if args.expires_in is None else engine.tokens.expiry_after(args.expires_in)
    token_id, token = engine.tokens.create(args.queue, args.scope, expires_ms=expires)
    created = {"token_id": token_id, "token": token, "queue": args.queue, "scopes": args.scope}
    created["expires_on"] = expires
    if args.sqs:
        access_key_id, secret = engine.access_keys.issue(token_id)
        created |= {"access_key_id": access_key_id, "secret_access_key": secret}
    _emit(args, created)


def cmd_token_list(args: argparse.Namespace) -> None:
    _emit(args, _client(args).list_tokens())


def cmd_token_revoke(args: argparse.Namespace) -> None:
    _client(args).revoke_token(args.token_id)
    _emit(args, {"revoked": args.token_id})


# --- queues ---------------------------------------------------------------------------------------------


def _settings_from(pairs: Sequence[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            sys.exit(f"sluice: --set takes key=value, got {pair!r}")
        try:
            settings[key] = json.loads(raw)
        except ValueError:
            settings[key] = raw
    return settings


def cmd_queues(args: argparse.Namespace) -> None:
    client = _client(args)
    if args.action != "list" and not args.name:
        sys.exit(f"sluice: queues {args.action} needs a queue name")
    if args.action == "create":
        _emit(args, client.create_queue(args.name, **_settings_from(args.set)))
    elif args.action == "list":
        _emit(args, client.list_queues())
    elif args.action == "get":
        _emit(args, client.get_queue(args.name))
    elif args.action == "update":
        _emit(args, client.update_queue(args.name, **_settings_from(args.set)))
    else:
        client.delete_queue(args.name)
        _emit(args, {"deleted": args.name})


# --- messages -------------------------------------------------------------------------------------------


def _bodies(args: argparse.Namespace) -> Iterator[Any]:
    if args.body is not None:
        for _ in range(args.count):
            yield args.body if args.content_type != "json" else json.loads(args.body)
        return
    source = sys.stdin if args.file in (None, "-") else open(args.file, encoding="utf-8")  # noqa: SIM115
    with source:
        for line in source:
            if line.strip():
                yield line.rstrip("\n") if args.content_type != "json" else json.loads(line)


def cmd_send(args: argparse.Namespace) -> None:
    """Send one body (--count times) or one message per input line, in batches, with a progress bar."""
    client = _client(args)
    total = args.count if args.body is not None else None
    sent = 0
    batch: list[dict[str, Any]] = []
    with _bar(args, total, "msg") as bar:

        def flush() -> None:
            nonlocal sent
            if batch:
                client.send_batch(args.queue, batch)
                sent += len(batch)
                bar.update(len(batch))
                batch.clear()

        for body in _bodies(args):
            message: dict[str, Any] = {"body": body, "content_type": args.content_type}
            if args.partition_key:
                message["partition_key"] = args.partition_key
            batch.append(message)
            if len(batch) >= args.batch_size:
                flush()
        flush()
    _emit(args, {"sent": sent})


def _backlog(client: Any, queue: str, group: str) -> int:
    """The group's backlog now (unacked messages, in flight included), from the metrics route."""
    figures = client.metrics(queue)
    return figures["consumer_groups"].get(group, figures)["backlog_count"]


def cmd_pull(args: argparse.Namespace) -> None:
    """Pull one batch; with --ack, ack it. The backlog reported is the one after this command."""
    client = _client(args)
    result = client.pull(
        args.queue,
        batch_size=args.batch_size,
        visibility_timeout_ms=args.visibility_timeout_ms,
        wait_time_ms=args.wait_time_ms,
        consumer_group=args.group,
    )
    acked = 0
    if args.ack and result.messages:
        acked = client.ack(args.queue, [m.lease_id for m in result.messages])["ackCount"]
    backlog = _backlog(client, args.queue, args.group) if acked else result.backlog
    summary = {"backlog": backlog, "pulled": len(result.messages), "acked": acked}
    if args.json:
        _emit(args, {"messages": [m.__dict__ for m in result.messages], **summary})
        return
    for message in result.messages:
        print(json.dumps(message.__dict__, sort_keys=True))
    print(json.dumps(summary), file=sys.stderr)


def cmd_drain(args: argparse.Namespace) -> None:
    """Pull and ack until the group is drained (an exact answer: nothing available, nothing in flight;
    or --max messages), with a progress bar: for clearing a queue while keeping what was in it
    (--output file, NDJSON), unlike purge. Each batch's acks ride on the next pull (one request and one
    state write for both); a run that dies leaves its last batch to come back after its lease, and a
    pull still throttled after the SDK's retries is tried again a second later."""
    from sluice.client import SluiceApiError

    client = _client(args)
    out = open(args.output, "w", encoding="utf-8") if args.output else None  # noqa: SIM115
    drained = 0
    written: list[str] = []  # lease ids of the batch written last: acked by the next pull (one write)
    try:
        with _bar(args, _backlog(client, args.queue, args.group), "msg") as bar:
            while args.max is None or drained < args.max:
                want = args.batch_size if args.max is None else min(args.batch_size, args.max - drained)
                acks = written or None
                try:
                    result = client.pull(
                        args.queue, batch_size=want, wait_time_ms=1000, consumer_group=args.group, acks=acks
                    )
                except SluiceApiError as exc:
                    if not exc.transient:
                        raise
                    time.sleep(1.0)  # still throttled after the SDK's retries: the acks wait for the next
                    continue
                written = []
                if result.drained:
                    break  # an exact answer: nothing available, nothing in flight
                if not result.messages:
                    continue
                if out:
                    out.writelines(json.dumps(m.__dict__, sort_keys=True) + "\n" for m in result.messages)
                    out.flush()  # written out before the next pull acks them
                written = [m.lease_id for m in result.messages]
                drained += len(result.messages)
                bar.update(len(result.messages))
            if written:  # --max reached: the last batch has no next pull to ride on
                client.ack(args.queue, written)
    finally:
        if out:
            out.close()
    _emit(args, {"drained": drained, "backlog": _backlog(client, args.queue, args.group)})


def cmd_ack(args: argparse.Namespace) -> None:
    client = _client(args)
    if args.retry:
        _emit(args, client.retry(args.queue, args.lease_ids, args.delay_seconds))
    else:
        _emit(args, client.ack(args.queue, args.lease_ids))


def cmd_lease(args: argparse.Namespace) -> None:
    _emit(args, _client(args).extend(args.queue, args.lease_ids, args.visibility_timeout_ms))


# --- consumer groups, operations, push consumers ------------------------------------------------------------


def cmd_groups(args: argparse.Namespace) -> None:
    client = _client(args)
    if args.action == "list":
        _emit(args, client.list_groups(args.queue))
        return
    if not args.name:
        sys.exit(f"sluice: groups {args.action} needs a group name")
    if args.action == "create":
        start = int(args.start) if args.start.isdigit() else args.start
        _emit(args, client.create_group(args.queue, args.name, start))
    elif args.action == "get":
        _emit(args, client.get_group(args.queue, args.name))
    else:
        client.delete_group(args.queue, args.name)
        _emit(args, {"deleted": args.name})


def cmd_operation(args: argparse.Namespace) -> None:
    """purge, pause, resume and metrics: one call each."""
    client = _client(args)
    _emit(args, getattr(client, args.command)(args.queue))


def cmd_redrive(args: argparse.Namespace) -> None:
    """Redrive calls until the dead letter queue is empty or --max-messages moved (a call works ≤ 20 s)."""
    client = _client(args)
    moved, result = 0, None
    with _bar(args, args.max_messages, "msg") as bar:
        while True:
            left = None if args.max_messages is None else args.max_messages - moved
            if left is not None and left <= 0:
                break
            result = client.redrive(args.queue, args.from_queue, left)
            moved += result["moved"]
            bar.update(result["moved"])
            if not result["moved"] or not result["remaining_in_source"]:
                break
    _emit(args, {**(result or {}), "moved": moved})


def cmd_consumers(args: argparse.Namespace) -> None:
    client = _client(args)
    if args.action == "list":
        _emit(args, client.list_consumers(args.queue))
    elif args.action == "create":
        config = {"type": args.type, **_settings_from(args.set)}
        options = {"id": args.id, "url": args.target_url, "function_arn": args.function_arn}
        options["consumer_group"] = args.consumer_group
        config.update({k: v for k, v in options.items() if v})
        _emit(args, client.create_consumer(args.queue, **config))
    elif not args.id:
        sys.exit(f"sluice: consumers {args.action} needs a consumer id")
    elif args.action == "get":
        _emit(args, client.get_consumer(args.queue, args.id))
    else:
        client.delete_consumer(args.queue, args.id)
        _emit(args, {"deleted": args.id})


# --- stream reads -------------------------------------------------------------------------------------------


def _position(value: str | None) -> tuple[str | None, int | None]:
    """--from: `-` (the beginning), an offset or cursor, a time in ms or ISO 8601 → (offset, start ms)."""
    if value is None or value == "-" or value.startswith("~") or (value.isdigit() and len(value) in (16, 32)):
        return value, None
    if value.isdigit():
        return None, int(value)
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        sys.exit(f"sluice: --from takes -, an offset, a time in ms or an ISO 8601 time; got {value!r}")
    return None, int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def cmd_tail(args: argparse.Namespace) -> None:
    """Print records in order (one JSON line each) and keep following, like `tail -f`: until Ctrl-C,
    --max-records or --max-seconds; --no-follow stops at the end of what is there."""
    client = _client(args)
    offset, start = _position(args.start)
    printed = 0
    if args.no_follow:
        while True:
            page = client.read(args.queue, offset=offset, start_ms=start, limit=args.limit, shard=args.shard)
            for record in page["records"][: None if args.max_records is None else args.max_records - printed]:
                print(json.dumps(record, sort_keys=True), flush=True)
                printed += 1
            done = args.max_records is not None and printed >= args.max_records
            if not page["records"] or done or not page.get("next_offset"):
                return
            offset, start = page["next_offset"], None
    records = client.follow(
        args.queue,
        offset=offset,
        start_ms=start,
        limit=args.limit,
        shard=args.shard,
        max_seconds=args.max_seconds,
    )
    try:
        for record in records:
            print(json.dumps(record, sort_keys=True), flush=True)
            printed += 1
            if args.max_records is not None and printed >= args.max_records:
                return
    except KeyboardInterrupt:
        return


def cmd_shards(args: argparse.Namespace) -> None:
    _emit(args, _client(args).shards(args.queue))


# --- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def http(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--url", help=f"API base URL (env SLUICE_URL, default {DEFAULT_URL})")
        p.add_argument("--token", help="bearer token (env SLUICE_TOKEN)")
        p.add_argument("--json", action="store_true", help="one compact JSON document on stdout (scripts)")
        return p

    def command(name: str, help_: str, func: Any, *, queue: bool = True) -> argparse.ArgumentParser:
        p = http(sub.add_parser(name, help=help_, description=help_))
        if queue:
            p.add_argument("queue")
        p.set_defaults(func=func)
        return p

    local = sub.add_parser("local", help="run Sluice on an embedded moto server")
    local.add_argument("--host", default="127.0.0.1")
    local.add_argument("--port", type=int, default=8787, help="0 picks a free port")
    local.add_argument("--admin-token", help=f"admin token to register (env {c.ENV_ADMIN_TOKEN})")
    local.add_argument(
        "--time-scale",
        type=float,
        default=float(os.environ.get(c.ENV_LOCAL_TIME_SCALE) or 1),
        help="run the stack's schedules (coordinator rule, tick, shard flush/maintenance) this many times "
        f"faster, with the same events (env {c.ENV_LOCAL_TIME_SCALE}; default 1, the deployed rates)",
    )
    local.add_argument(
        "--open-stream-prefix",
        help="serve /v1/stream/ paths starting with this prefix without a token ('*': all; off by "
        f"default; env {c.ENV_OPEN_STREAM_PREFIX}); for conformance runs and public demo streams",
    )
    local.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="stack context, as cdk deploy -c takes it (docs/deploy.md): the local gateway, functions and "
        "schedules follow the template it synthesizes, e.g. -c api_route_throttles='POST /=5000:5000'",
    )
    local.add_argument(
        "--regions",
        help="run one local region per name (comma list, home region first), each on its own port "
        "(--port, then the ports after it), on one moto server; see sluice/local/regions.py",
    )
    local.add_argument(
        "--inter-region-delay-ms",
        type=float,
        default=70.0,
        help="with --regions: every AWS call from one region to another waits this long (default 70)",
    )
    local.add_argument(
        "--replication-lag-ms",
        type=float,
        default=1000.0,
        help="with --regions: a control-table write reaches the other regions after this long (default 1000)",
    )
    local.set_defaults(func=cmd_local)

    token = sub.add_parser("token", help="create, list and revoke API tokens")
    token_sub = token.add_subparsers(dest="action", required=True)
    create = http(token_sub.add_parser("create"))
    create.add_argument("--queue", required=True, help="queue name, or * for all queues")
    create.add_argument("--scope", action="append", required=True, choices=["read", "write", "admin"])
    create.add_argument("--expires-in", type=int, metavar="SECONDS", help="refused after this long")
    create.add_argument(
        "--sqs", action="store_true", help="also issue an access key id and secret for the SQS face (SigV4)"
    )
    create.set_defaults(func=cmd_token_create)
    http(token_sub.add_parser("list")).set_defaults(func=cmd_token_list)
    revoke = http(token_sub.add_parser("revoke"))
    revoke.add_argument("token_id")
    revoke.set_defaults(func=cmd_token_revoke)

    lease_key = sub.add_parser("lease-key", help="rotate the key that signs lease ids")
    lease_key_sub = lease_key.add_subparsers(dest="action", required=True)
    rotate = lease_key_sub.add_parser("rotate")
    rotate.add_argument("--secret-id", help=f"the secret's ARN or name (env {c.ENV_LEASE_KEY_SECRET})")
    rotate.add_argument("--json", action="store_true", help="one compact JSON document on stdout (scripts)")
    rotate.set_defaults(func=cmd_lease_key_rotate)

    queues = command("queues", "create, list, get, update and delete queues", cmd_queues, queue=False)
    queues.add_argument("action", choices=["create", "list", "get", "update", "delete"])
    queues.add_argument("name", nargs="?")
    queues.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a queue setting")

    send = command("send", "send messages (progress bar on stderr)", cmd_send)
    send.add_argument("body", nargs="?", help="one body; without it, one message per line of --file/stdin")
    send.add_argument("--file", help="NDJSON (json) or lines (text); - for stdin")
    send.add_argument("--count", type=int, default=1, help="send BODY this many times")
    send.add_argument("--batch-size", type=int, default=100)
    send.add_argument("--content-type", choices=["json", "text", "bytes"], default="json")
    send.add_argument("--partition-key")
    send.add_argument("--quiet", action="store_true", help="no progress bar")

    pull = command("pull", "pull a batch (one JSON line per message; the summary on stderr)", cmd_pull)
    pull.add_argument("--batch-size", type=int, default=5)
    pull.add_argument("--visibility-timeout-ms", type=int)
    pull.add_argument("--wait-time-ms", type=int, default=0)
    pull.add_argument("--group", default="default")
    pull.add_argument("--ack", action="store_true", help="ack the batch right away")

    drain = command("drain", "pull and ack until the queue is empty (progress bar on stderr)", cmd_drain)
    drain.add_argument("--group", default="default")
    drain.add_argument("--batch-size", type=int, default=100)
    drain.add_argument("--max", type=int, help="stop after this many messages")
    drain.add_argument("--output", help="write the drained messages here (NDJSON)")
    drain.add_argument("--quiet", action="store_true", help="no progress bar")

    ack = command("ack", "ack (or --retry) leases", cmd_ack)
    ack.add_argument("lease_ids", nargs="+")
    ack.add_argument("--retry", action="store_true")
    ack.add_argument("--delay-seconds", type=int)

    lease = command("lease", "extend leases of long jobs (visibility from now)", cmd_lease)
    lease.add_argument("lease_ids", nargs="+")
    lease.add_argument("--visibility-timeout-ms", type=int, required=True)

    groups = command("groups", "create, list, get and delete consumer groups", cmd_groups, queue=False)
    groups.add_argument("action", choices=["create", "list", "get", "delete"])
    groups.add_argument("queue")
    groups.add_argument("name", nargs="?")
    groups.add_argument("--start", default="earliest", help="earliest, latest or a time in ms (create)")

    command("purge", "delete every message of a queue", cmd_operation)
    command("pause", "pause delivery (sends still work)", cmd_operation)
    command("resume", "resume delivery", cmd_operation)
    command("metrics", "backlog, in-flight, oldest message, per group and shard", cmd_operation)

    redrive = command("redrive", "move messages from a dead letter queue back into QUEUE", cmd_redrive)
    redrive.add_argument("--from", dest="from_queue", required=True, help="the dead letter queue")
    redrive.add_argument("--max-messages", type=int)
    redrive.add_argument("--quiet", action="store_true", help="no progress bar")

    consumers = command(
        "consumers", "create, list, get and delete push consumers", cmd_consumers, queue=False
    )
    consumers.add_argument("action", choices=["create", "list", "get", "delete"])
    consumers.add_argument("queue")
    consumers.add_argument("id", nargs="?", help="consumer id (generated on create when absent)")
    consumers.add_argument("--type", choices=["webhook", "lambda"], default="webhook")
    consumers.add_argument("--target-url", dest="target_url", help="webhook target (https://...)")
    consumers.add_argument("--function-arn", help="lambda target")
    consumers.add_argument("--group", dest="consumer_group", help="consumer group [default]")
    consumers.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="max_batch_size etc."
    )

    tail = command("tail", "print records in order and follow new ones, like tail -f", cmd_tail)
    tail.add_argument("--from", dest="start", help="- (beginning), an offset, a time (ms or ISO 8601)")
    tail.add_argument("--shard", type=int, help="read one shard (its own 32-digit offsets)")
    tail.add_argument("--limit", type=int, default=100, help="records per request")
    tail.add_argument("--max-records", type=int, help="stop after this many records")
    tail.add_argument("--max-seconds", type=float, help="stop following after this long")
    tail.add_argument("--no-follow", action="store_true", help="stop at the end of what is there")

    command("shards", "shards with their offset ranges and lineage", cmd_shards)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    from sluice.client import SluiceApiError

    try:
        args.func(args)
    except SluiceApiError as exc:
        sys.exit(f"sluice: {exc}")


if __name__ == "__main__":
    main()
