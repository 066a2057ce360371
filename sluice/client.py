"""Python SDK for the Sluice HTTP API (native `/v1` face).

Thread-safe (one urllib3 pool per client). Retries what the server says is retryable (any answer with
`Retry-After`: 429, 503, 409 10115; and 502/504 from the gateway) after that many seconds, and network
errors with backoff. Sends carry an Idempotency-Key, so a retried send stores nothing twice: keyed
requests are also retried after a 500 (a send that died stored nothing, and its key is released). The
gateway's own 500 (no Sluice envelope: Lambda refused the invocation past a concurrency quota, or the
function crashed) is also retried for what is safe to repeat: reads, pulls, acks, lease extensions.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import urllib3

from sluice.producer import BatchingProducer

if TYPE_CHECKING:  # sluice.webhooks imports pydantic (via sluice.leases): the Glue jobs' client must not
    from sluice.webhooks import WebhookVerifier

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})

# Signs one request: (method, url, headers, body) -> the headers to send (e.g. SigV4 for IAM callers).
RequestAuth = Callable[[str, str, dict[str, str], bytes | None], dict[str, str]]


class SluiceApiError(Exception):
    """An error answer: HTTP status, the stable error code and the server's sentence."""

    def __init__(self, status: int, code: int | None, message: str) -> None:
        super().__init__(f"HTTP {status} (code {code}): {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def transient(self) -> bool:
        """The answer asks for a pause, not a change: a throttle (429: a handler's, or API Gateway's
        past its quota), a moment's unavailability (502, 503, 504), or API Gateway's own 500 (no code: a
        function that crashed, or Lambda past its concurrency). A repeatable request may go again; the
        SDK's own retries already did, so this is for loops that run on (`iterate`, a Spark puller)."""
        return self.status in RETRYABLE_STATUS or (self.status == 500 and self.code is None)


@dataclass
class Message:
    """A pulled message; `body` follows the native rule (JSON value, string, or base64 for bytes)."""

    id: str
    body: Any
    content_type: str
    timestamp_ms: int
    attempts: int
    lease_id: str
    partition_key: str | None
    attributes: dict[str, str]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Message:
        return cls(**{k: raw.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]


@dataclass
class PullResult:
    messages: list[Message]
    backlog: int
    ack: dict[str, Any] | None = None  # the outcome of the acks the pull carried, as `ack` answers
    # The backlog is exact (the pull read every lane of every shard): an empty answer proves it. None: a
    # server older than the exact figures (it stops on an empty answer with backlog 0, as it did then).
    exact: bool | None = None
    split: dict[str, int] | None = None  # exact only: {"available", "in_flight", "delayed"}

    @property
    def drained(self) -> bool:
        """Nothing to deliver now and nothing in flight that could come back: an exact answer only.
        (Messages still delayed do not count: they are not deliverable before their time.)"""
        if self.exact is None:
            return not self.messages and self.backlog == 0
        split = self.split or {}
        return (
            self.exact
            and not self.messages
            and split.get("available", 1) == 0
            and split.get("in_flight", 1) == 0
        )


class SluiceClient:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_seconds: float = 35.0,
        max_attempts: int = 6,
        pool_size: int = 16,
        auth: RequestAuth | None = None,
    ) -> None:
        """`token` is sent as a Bearer token; `auth`, if given, signs every attempt instead or as well
        (IAM callers: SigV4 for `execute-api`), so pass `token=None` with it."""
        self.base_url = base_url.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._auth = auth
        self._timeout = urllib3.Timeout(connect=5.0, read=timeout_seconds)
        self._max_attempts = max_attempts
        self._http = urllib3.PoolManager(maxsize=pool_size, retries=False)
        self._webhooks: WebhookVerifier | None = None

    # --- transport ------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        repeatable: bool = False,
    ) -> Any:
        """Call the API and return `result` of the envelope; raise SluiceApiError on an error answer.
        `repeatable`: the request may be sent again after the gateway's 500 (a GET always may)."""
        repeatable = repeatable or method == "GET"
        url = self.base_url + path
        if query:
            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        all_headers = {**self._headers, **(headers or {})}
        keyed = "Idempotency-Key" in all_headers
        for attempt in range(1, self._max_attempts + 1):
            sent_headers = self._auth(method, url, dict(all_headers), data) if self._auth else all_headers
            try:
                resp = self._http.request(method, url, body=data, headers=sent_headers, timeout=self._timeout)
            except urllib3.exceptions.HTTPError:
                if attempt == self._max_attempts:
                    raise
                time.sleep(backoff_seconds(attempt))
                continue
            if attempt < self._max_attempts and _retryable(
                resp.status, resp.headers, keyed, repeatable, resp.data
            ):
                retry_after = resp.headers.get("Retry-After")
                time.sleep(float(retry_after) if retry_after else backoff_seconds(attempt))
                continue
            return _unwrap(resp.status, resp.data)
        raise AssertionError("unreachable")

    # --- queues ---------------------------------------------------------------------------------------

    def create_queue(self, name: str, **settings: Any) -> dict[str, Any]:
        return self.request("POST", "/v1/queues", {"queue_name": name, "settings": settings})

    def get_queue(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/queues/{quote(name)}")

    def list_queues(self) -> list[dict[str, Any]]:
        queues, cursor = [], None
        while True:
            page = self.request("GET", "/v1/queues", query={"cursor": cursor})
            queues += page["queues"]
            cursor = page.get("cursor")
            if not cursor:
                return queues

    def update_queue(self, name: str, **settings: Any) -> dict[str, Any]:
        return self.request("PATCH", f"/v1/queues/{quote(name)}", {"settings": settings})

    def delete_queue(self, name: str) -> None:
        self.request("DELETE", f"/v1/queues/{quote(name)}")

    # --- sending --------------------------------------------------------------------------------------

    def send(self, queue: str, body: Any, **options: Any) -> dict[str, Any]:
        """Send one message; options: content_type, delay_seconds, partition_key, attributes."""
        return self.send_batch(queue, [{"body": body, **options}])

    def send_batch(
        self,
        queue: str,
        messages: Iterable[dict[str, Any]],
        *,
        delay_seconds: int | None = None,
        version: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Send up to 100 messages in one request; the answer has `message_ids` and `offsets`."""
        body: dict[str, Any] = {"messages": list(messages)}
        if delay_seconds is not None:
            body["delay_seconds"] = delay_seconds
        key = idempotency_key or uuid.uuid4().hex
        return self.request(
            "POST",
            f"/v1/queues/{quote(queue)}/messages",
            body,
            query={"version": version},
            headers={"Idempotency-Key": key},
        )

    # --- consuming ------------------------------------------------------------------------------------

    def pull(
        self,
        queue: str,
        *,
        batch_size: int = 5,
        visibility_timeout_ms: int | None = None,
        wait_time_ms: int = 0,
        consumer_group: str = "default",
        acks: Iterable[str] | None = None,
    ) -> PullResult:
        """Lease up to `batch_size` messages. `acks` (lease ids of earlier pulls) are acked in the same
        request and, on the shards the pull leases from, the same state write: half the requests and
        writes of a separate `ack`. Their outcome is `result.ack`."""
        body: dict[str, Any] = {
            "batch_size": batch_size,
            "wait_time_ms": wait_time_ms,
            "consumer_group": consumer_group,
        }
        if visibility_timeout_ms is not None:
            body["visibility_timeout_ms"] = visibility_timeout_ms
        if acks is not None:
            body["acks"] = [{"lease_id": lease} for lease in acks]
        result = self.request("POST", f"/v1/queues/{quote(queue)}/messages/pull", body, repeatable=True)
        return PullResult(
            [Message.from_json(m) for m in result["messages"]],
            result["message_backlog_count"],
            result.get("ack"),
            result.get("backlog_exact"),
            result.get("backlog"),
        )

    def ack(
        self, queue: str, lease_ids: Iterable[str], retries: Iterable[tuple[str, int | None]] = ()
    ) -> dict[str, Any]:
        """Ack leases, and retry others as (lease_id, delay_seconds or None for the queue default)."""
        retry_list = []
        for lease_id, delay in retries:
            entry: dict[str, Any] = {"lease_id": lease_id}
            if delay is not None:
                entry["delay_seconds"] = delay
            retry_list.append(entry)
        body = {"acks": [{"lease_id": lease} for lease in lease_ids], "retries": retry_list}
        return self.request("POST", f"/v1/queues/{quote(queue)}/messages/ack", body, repeatable=True)

    def retry(self, queue: str, lease_ids: Iterable[str], delay_seconds: int | None = None) -> dict[str, Any]:
        return self.ack(queue, [], [(lease, delay_seconds) for lease in lease_ids])

    def peek(self, queue: str, batch_size: int = 5, consumer_group: str = "default") -> list[dict[str, Any]]:
        """Up to `batch_size` unacked messages of a group, without leasing them or counting a delivery."""
        body = {"batch_size": batch_size, "consumer_group": consumer_group}
        return self.request("POST", f"/v1/queues/{quote(queue)}/messages/peek", body, repeatable=True)[
            "messages"
        ]

    def extend(self, queue: str, lease_ids: Iterable[str], visibility_timeout_ms: int) -> dict[str, Any]:
        body = {"lease_ids": list(lease_ids), "visibility_timeout_ms": visibility_timeout_ms}
        return self.request("POST", f"/v1/queues/{quote(queue)}/messages/lease", body, repeatable=True)

    def iterate(
        self,
        queue: str,
        *,
        batch_size: int = 10,
        wait_time_ms: int = 1000,
        consumer_group: str = "default",
        stop_when_empty: bool = True,
    ) -> Iterator[Message]:
        """Yield messages one by one; each batch is acked once the caller has taken all of it, on the
        next pull (one request and one state write for both).

        With `stop_when_empty`, it stops on the first pull that proves the group drained: an exact
        answer (every shard read) with nothing available and nothing in flight. An empty answer alone is
        not enough: messages leased by another consumer come back when their lease runs out.
        A message whose processing raises is not acked, so it comes back after its visibility timeout.
        A pull still throttled after the SDK's retries (`SluiceApiError.transient`) is tried again after
        a pause, its acks kept for it: a consumer outlives a busy front door instead of dying with the
        acks of the batch it finished.
        """
        done: list[str] | None = None
        paused = 0
        while True:
            try:
                result = self.pull(
                    queue,
                    batch_size=batch_size,
                    wait_time_ms=wait_time_ms,
                    consumer_group=consumer_group,
                    acks=done,
                )
            except SluiceApiError as exc:
                if not exc.transient:
                    raise
                paused += 1
                time.sleep(backoff_seconds(min(paused, self._max_attempts)))
                continue
            paused = 0
            done = None
            if not result.messages:
                if stop_when_empty and result.drained:
                    return
                continue
            yield from result.messages
            done = [m.lease_id for m in result.messages]

    # --- consumer groups ------------------------------------------------------------------------------

    def create_group(self, queue: str, name: str, start: str | int = "earliest") -> dict[str, Any]:
        """A consumer group receiving every message from `start`: earliest, latest or a time in ms."""
        return self.request(
            "POST", f"/v1/queues/{quote(queue)}/consumer-groups", {"name": name, "start": start}
        )

    def list_groups(self, queue: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/v1/queues/{quote(queue)}/consumer-groups")["consumer_groups"]

    def get_group(self, queue: str, name: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/queues/{quote(queue)}/consumer-groups/{quote(name)}")

    def delete_group(self, queue: str, name: str) -> None:
        self.request("DELETE", f"/v1/queues/{quote(queue)}/consumer-groups/{quote(name)}")

    # --- operations -----------------------------------------------------------------------------------

    def purge(self, queue: str) -> dict[str, Any]:
        return self.request("POST", f"/v1/queues/{quote(queue)}/purge")

    def pause(self, queue: str) -> dict[str, Any]:
        return self.request("POST", f"/v1/queues/{quote(queue)}/pause")

    def resume(self, queue: str) -> dict[str, Any]:
        return self.request("POST", f"/v1/queues/{quote(queue)}/resume")

    def redrive(self, queue: str, from_queue: str, max_messages: int | None = None) -> dict[str, Any]:
        """Move messages from a dead letter queue back into `queue`; call again while
        `remaining_in_source` > 0 (one call works for at most 20 s)."""
        body: dict[str, Any] = {"from": from_queue}
        if max_messages is not None:
            body["max_messages"] = max_messages
        return self.request("POST", f"/v1/queues/{quote(queue)}/redrive", body)

    def metrics(self, queue: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/queues/{quote(queue)}/metrics")

    # --- tokens ---------------------------------------------------------------------------------------

    def create_token(
        self, queue: str, scopes: Iterable[str], expires_in_seconds: int | None = None
    ) -> dict[str, Any]:
        """A token for `queue` (or `*`), refused after `expires_in_seconds` when given; the secret is in
        the answer only."""
        body: dict[str, Any] = {"queue": queue, "scopes": list(scopes)}
        if expires_in_seconds is not None:
            body["expires_in_seconds"] = expires_in_seconds
        return self.request("POST", "/v1/tokens", body)

    def issue_access_key(self, token_id: str) -> dict[str, Any]:
        """SQS credentials (access key id, secret access key) acting as the token; shown once."""
        return self.request("POST", f"/v1/tokens/{quote(token_id)}/access-key")

    def list_tokens(self) -> Any:
        return self.request("GET", "/v1/tokens")

    def revoke_token(self, token_id: str) -> None:
        self.request("DELETE", f"/v1/tokens/{quote(token_id)}")

    # --- push consumers -------------------------------------------------------------------------------

    def create_consumer(self, queue: str, **config: Any) -> dict[str, Any]:
        """A push consumer: type webhook (url) or lambda (function_arn), plus its settings."""
        return self.request("POST", f"/v1/queues/{quote(queue)}/consumers", config)

    def list_consumers(self, queue: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/v1/queues/{quote(queue)}/consumers")["consumers"]

    def get_consumer(self, queue: str, consumer_id: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/queues/{quote(queue)}/consumers/{quote(consumer_id)}")

    def delete_consumer(self, queue: str, consumer_id: str) -> None:
        self.request("DELETE", f"/v1/queues/{quote(queue)}/consumers/{quote(consumer_id)}")

    def webhook_keys(self) -> dict[str, Any]:
        """The deployment's JWKS document: the public keys that verify webhook deliveries (no token)."""
        from sluice.webhooks import JWKS_PATH  # on first use: the Glue jobs ship this SDK without pydantic

        resp = self._http.request("GET", self.base_url + JWKS_PATH, timeout=self._timeout)
        if resp.status != 200:
            raise SluiceApiError(resp.status, None, f"GET {JWKS_PATH} answered {resp.status}")
        keys: dict[str, Any] = json.loads(resp.data)
        return keys

    def verify_webhook(self, headers: Mapping[str, str], body: bytes | str) -> None:
        """Check that a webhook request is a delivery from this deployment: signed by one of its published
        keys, signed within the last 5 minutes, body untouched, and not accepted before by this client.
        Pass the request's headers and its raw body (before parsing). Returns on success, raises
        `sluice.webhooks.WebhookVerificationError` otherwise (answer 4xx: Sluice retries only on its own
        deliveries). The keys are fetched once and again when a signature needs a key not yet cached."""
        from sluice.webhooks import WebhookVerifier

        if self._webhooks is None:
            self._webhooks = WebhookVerifier(self.webhook_keys)
        self._webhooks.verify(headers, body)

    # --- stream reads ---------------------------------------------------------------------------------

    def read(
        self,
        queue: str,
        *,
        offset: str | None = None,
        start_ms: int | None = None,
        limit: int = 100,
        timeout_sec: float = 0,
        shard: int | None = None,
    ) -> dict[str, Any]:
        """One page of an ordered, lease-free read: `{"records", "next_offset"}`. `offset` "-" reads
        from the beginning; neither offset nor start: only records published after the call."""
        query = {
            "offset": offset,
            "start": start_ms,
            "limit": limit,
            "timeout_sec": timeout_sec,
            "shard": shard,
        }
        return self.request("GET", f"/v1/queues/{quote(queue)}/records", query=query)

    def follow(
        self,
        queue: str,
        *,
        offset: str | None = None,
        start_ms: int | None = None,
        limit: int = 100,
        shard: int | None = None,
        max_seconds: float | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Yield records from the position given and keep waiting for new ones (`tail -f`, long-polls of
        up to 20 s), for `max_seconds` if given, else until the caller stops iterating."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        while True:
            wait = 20.0 if deadline is None else min(20.0, deadline - time.monotonic())
            if wait <= 0:
                return
            page = self.read(
                queue, offset=offset, start_ms=start_ms, limit=limit, timeout_sec=round(wait, 3), shard=shard
            )
            yield from page["records"]
            if page.get("next_offset"):
                offset, start_ms = page["next_offset"], None

    def shards(self, queue: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/v1/queues/{quote(queue)}/shards")["shards"]

    def producer(self, queue: str, **options: Any) -> BatchingProducer:
        """A batching producer for `queue` (see sluice/producer.py): `linger_ms`, `max_batch_messages`,
        `max_batch_bytes`. Close it (or use it in a `with` block) before closing the client."""
        return BatchingProducer(self, queue, **options)

    def close(self) -> None:
        self._http.clear()


def _retryable(status: int, headers: Any, keyed: bool, repeatable: bool, data: bytes) -> bool:
    """The server marks what may be retried with `Retry-After`; the gateway's 502/504 carry none. A
    handler's 500 (a bug, logged) is retried only with an Idempotency-Key, which makes a repeat of a
    send that died harmless. The gateway's own 500, without our envelope, is also what a throttled
    invocation gets (past the account's or a reserved concurrency: docs/api.md "Gateway limits and
    failures"); a request safe to repeat goes again (a pull's leases, if it leased before a crash, come
    back when they run out, retried or not)."""
    if status in RETRYABLE_STATUS or "Retry-After" in headers:
        return True
    return status == 500 and (keyed or (repeatable and not _is_envelope(data)))


def _is_envelope(data: bytes) -> bool:
    """Whether an answer is Sluice's `{"success", "errors", ...}` envelope (a handler answered it)."""
    try:
        doc = json.loads(data) if data else None
    except ValueError:
        return False
    return isinstance(doc, dict) and "success" in doc


def backoff_seconds(attempt: int, uniform: Callable[[float, float], float] = random.uniform) -> float:
    """The pause before a retry without `Retry-After`: doubling from 0.1 s, at most 5 s, jittered
    (`uniform`: the draw, for a caller that keeps its own random stream, as the twin does)."""
    return min(5.0, 0.1 * 2**attempt) * uniform(0.5, 1.0)


def _unwrap(status: int, data: bytes) -> Any:
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        doc = {}
    if 200 <= status < 300:
        return doc.get("result") if isinstance(doc, dict) and "result" in doc else doc
    errs = doc.get("errors") if isinstance(doc, dict) else None
    if errs:
        raise SluiceApiError(status, errs[0].get("code"), errs[0].get("message", ""))
    message = doc.get("message") or doc.get("error") if isinstance(doc, dict) else None
    raise SluiceApiError(status, None, message or data.decode(errors="replace")[:200])
