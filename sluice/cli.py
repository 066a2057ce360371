"""The `sluice` command: the local runtime, tokens, and queue operations over the HTTP API.

HTTP commands read `SLUICE_URL` (default http://127.0.0.1:8787) and `SLUICE_TOKEN`, or --url/--token.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
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


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


# --- local ----------------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> None:
    from sluice.local.runtime import LocalRuntime

    admin_token = args.admin_token or os.environ.get(c.ENV_ADMIN_TOKEN)
    if not admin_token:
        import secrets

        admin_token = "sluice_local_" + secrets.token_urlsafe(16)
        print(f"admin token: {admin_token}", file=sys.stderr, flush=True)
    open_prefix = args.open_stream_prefix or os.environ.get(c.ENV_OPEN_STREAM_PREFIX, "")
    extra_env = {c.ENV_OPEN_STREAM_PREFIX: open_prefix} if open_prefix else {}
    runtime = LocalRuntime(host=args.host, port=args.port, admin_token=admin_token, extra_env=extra_env)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    runtime.start()
    print(f"sluice local ready on {runtime.url}", flush=True)
    try:
        stop.wait()
    finally:
        runtime.stop()


# --- tokens ---------------------------------------------------------------------------------------------


def cmd_token_create(args: argparse.Namespace) -> None:
    """With an admin SLUICE_TOKEN: over HTTP. Without one (the first token): straight into the control
    table named by SLUICE_CONTROL_TABLE etc., with the caller's AWS credentials."""
    if args.token or os.environ.get("SLUICE_TOKEN"):
        _print(_client(args).request("POST", "/v1/tokens", {"queue": args.queue, "scopes": args.scope}))
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
    token_id, token = Sluice.from_settings(settings).tokens.create(args.queue, args.scope)
    _print({"token_id": token_id, "token": token, "queue": args.queue, "scopes": args.scope})


def cmd_token_list(args: argparse.Namespace) -> None:
    _print(_client(args).request("GET", "/v1/tokens"))


def cmd_token_revoke(args: argparse.Namespace) -> None:
    _client(args).request("DELETE", f"/v1/tokens/{args.token_id}")


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
    if args.action == "create":
        _print(client.create_queue(args.name, **_settings_from(args.set)))
    elif args.action == "list":
        _print(client.list_queues())
    elif args.action == "get":
        _print(client.get_queue(args.name))
    elif args.action == "update":
        _print(client.update_queue(args.name, **_settings_from(args.set)))
    else:
        client.delete_queue(args.name)


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
    from tqdm import tqdm

    client = _client(args)
    total = args.count if args.body is not None else None
    sent = 0
    batch: list[dict[str, Any]] = []
    with tqdm(total=total, unit="msg", disable=args.quiet or None, file=sys.stderr) as bar:

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
    _print({"sent": sent})


def cmd_pull(args: argparse.Namespace) -> None:
    client = _client(args)
    result = client.pull(
        args.queue,
        batch_size=args.batch_size,
        visibility_timeout_ms=args.visibility_timeout_ms,
        wait_time_ms=args.wait_time_ms,
        consumer_group=args.group,
    )
    for message in result.messages:
        print(json.dumps(message.__dict__, sort_keys=True))
    if args.ack and result.messages:
        client.ack(args.queue, [m.lease_id for m in result.messages])
    print(
        json.dumps({"backlog": result.backlog, "pulled": len(result.messages), "acked": args.ack}),
        file=sys.stderr,
    )


def cmd_ack(args: argparse.Namespace) -> None:
    client = _client(args)
    if args.retry:
        _print(client.retry(args.queue, args.lease_ids, args.delay_seconds))
    else:
        _print(client.ack(args.queue, args.lease_ids))


# --- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def http(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--url", help=f"API base URL (env SLUICE_URL, default {DEFAULT_URL})")
        p.add_argument("--token", help="bearer token (env SLUICE_TOKEN)")
        return p

    local = sub.add_parser("local", help="run Sluice on an embedded moto server")
    local.add_argument("--host", default="127.0.0.1")
    local.add_argument("--port", type=int, default=8787, help="0 picks a free port")
    local.add_argument("--admin-token", help=f"admin token to register (env {c.ENV_ADMIN_TOKEN})")
    local.add_argument(
        "--open-stream-prefix",
        help="serve /v1/stream/ paths starting with this prefix without a token ('*': all; off by "
        f"default; env {c.ENV_OPEN_STREAM_PREFIX}); for conformance runs and public demo streams",
    )
    local.set_defaults(func=cmd_local)

    token = sub.add_parser("token", help="create, list and revoke API tokens")
    token_sub = token.add_subparsers(dest="action", required=True)
    create = http(token_sub.add_parser("create"))
    create.add_argument("--queue", required=True, help="queue name, or * for all queues")
    create.add_argument("--scope", action="append", required=True, choices=["read", "write", "admin"])
    create.set_defaults(func=cmd_token_create)
    http(token_sub.add_parser("list")).set_defaults(func=cmd_token_list)
    revoke = http(token_sub.add_parser("revoke"))
    revoke.add_argument("token_id")
    revoke.set_defaults(func=cmd_token_revoke)

    queues = http(sub.add_parser("queues", help="create, list, get, update and delete queues"))
    queues.add_argument("action", choices=["create", "list", "get", "update", "delete"])
    queues.add_argument("name", nargs="?")
    queues.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a queue setting")
    queues.set_defaults(func=cmd_queues)

    send = http(sub.add_parser("send", help="send messages"))
    send.add_argument("queue")
    send.add_argument("body", nargs="?", help="one body; without it, one message per line of --file/stdin")
    send.add_argument("--file", help="NDJSON (json) or lines (text); - for stdin")
    send.add_argument("--count", type=int, default=1, help="send BODY this many times")
    send.add_argument("--batch-size", type=int, default=100)
    send.add_argument("--content-type", choices=["json", "text", "bytes"], default="json")
    send.add_argument("--partition-key")
    send.add_argument("--quiet", action="store_true", help="no progress bar")
    send.set_defaults(func=cmd_send)

    pull = http(sub.add_parser("pull", help="pull a batch (one JSON line per message)"))
    pull.add_argument("queue")
    pull.add_argument("--batch-size", type=int, default=5)
    pull.add_argument("--visibility-timeout-ms", type=int)
    pull.add_argument("--wait-time-ms", type=int, default=0)
    pull.add_argument("--group", default="default")
    pull.add_argument("--ack", action="store_true", help="ack the batch right away")
    pull.set_defaults(func=cmd_pull)

    ack = http(sub.add_parser("ack", help="ack (or --retry) leases"))
    ack.add_argument("queue")
    ack.add_argument("lease_ids", nargs="+")
    ack.add_argument("--retry", action="store_true")
    ack.add_argument("--delay-seconds", type=int)
    ack.set_defaults(func=cmd_ack)
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
