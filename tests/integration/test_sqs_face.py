"""The SQS face through the real broker handler, in-process: boto3 signs each request as usual and a
`before-send` hook hands it to the handler as API Gateway's event (no socket), so the suite checks
semantics quickly; tests/e2e/test_sqs_clients.py runs the real clients over HTTP."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from lambdas.faces.sqs import messages
from sluice.engine.accesskeys import AccessKeys
from sluice.engine.clock import Clock
from sluice.leases import LeaseKeyring
from sluice.models import OutgoingMessage

HOST = "sqs.sluice.test"


class _Raw:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


def _in_process(request: Any, **_: Any) -> AWSResponse:
    from urllib.parse import urlsplit

    from sluice.local import gateway
    from sluice.local.workers import invoke

    parts = urlsplit(request.url)
    path = parts.path or "/"
    found = gateway.match(request.method, path)
    assert found is not None, path
    route, params = found
    headers = [(k, v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()]
    headers.append(("host", parts.netloc))  # the HTTP client adds it on the wire; it is signed
    body = request.body or b""
    body = body.encode() if isinstance(body, str) else body
    event = gateway.build_event(route, params, request.method, path, parts.query, headers, body)
    status, out_headers, _cookies, out = gateway.unpack_response(invoke(route.function, event))
    return AWSResponse(request.url, status, dict(out_headers), _Raw(out))


@pytest.fixture
def sqs_for(engine):
    def make(queue: str = "*", scopes: tuple[str, ...] = ("admin",), secret: str | None = None) -> Any:
        token_id, _ = engine.tokens.create(queue, list(scopes))
        key, derived = engine.access_keys.issue(token_id)
        client = boto3.client(
            "sqs",
            endpoint_url=f"http://{HOST}",
            region_name="eu-west-1",
            aws_access_key_id=key,
            aws_secret_access_key=secret or derived,
            config=Config(retries={"max_attempts": 1}),
        )
        client.meta.events.register("before-send.sqs", _in_process)
        client.token_id = token_id  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture
def sqs(sqs_for):
    return sqs_for()


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_message_attribute_md5_is_the_one_sqs_computes():
    from moto.sqs.models import Message

    attributes = {
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
        "n": {"DataType": "Number.int", "StringValue": "12"},
        "s": {"DataType": "String", "StringValue": "héllo"},
    }
    reference = Message("id", "body")
    reference.message_attributes = attributes
    assert messages.attributes_md5(attributes) == reference.attribute_md5


def test_the_access_key_root_survives_lease_key_rotations():
    ring = LeaseKeyring.parse(json.dumps({"current_id": 1, "current": "k" * 64}))
    once = ring.rotated(1)
    twice = LeaseKeyring.parse(once.to_json()).rotated(2)
    assert ring.access_key_root == once.access_key_root == LeaseKeyring.parse(twice.to_json()).access_key_root
    assert twice.current != ring.current


def test_revoking_a_token_revokes_its_access_key_and_a_new_key_replaces_the_old(engine):
    token_id, _ = engine.tokens.create("*", ["read"])
    first, _ = engine.access_keys.issue(token_id)
    second, _ = engine.access_keys.issue(token_id)
    assert engine.access_keys._read(engine.backend.control, first) is None
    assert engine.access_keys._read(engine.backend.control, second) is not None
    engine.tokens.revoke(token_id)
    assert engine.access_keys._read(engine.backend.control, second) is None


def test_a_revoked_access_key_is_honoured_only_until_its_cache_runs_out_on_the_engines_clock(engine):
    """The cache of access keys measures its lifetime on the engine's clock, not `time`: the twin and the
    local runtime run it in their own time."""
    ticks = [0.0]
    backend = dataclasses.replace(engine.backend, clock=Clock(monotonic=lambda: ticks[0]))
    cache = AccessKeys(backend, engine.lease_keys, cache_ttl_seconds=30.0)
    token_id, _ = engine.tokens.create("*", ["read"])
    key, _ = cache.issue(token_id)
    assert cache.principal(key) is not None
    engine.tokens.revoke(token_id)  # deletes the key's item; this cache has not been told
    ticks[0] = 29.0
    assert cache.principal(key) is not None  # still cached
    ticks[0] = 31.0
    assert cache.principal(key) is None


def test_an_access_key_stops_with_its_tokens_lifetime(sqs_for, engine):
    reader = sqs_for(scopes=("read",))
    reader.list_queues()  # a key of a token without a lifetime works
    token_id, _ = engine.tokens.create("*", ["read"], expires_ms=engine.backend.clock() - 1)
    key, secret = engine.access_keys.issue(token_id)
    expired = boto3.client(
        "sqs",
        endpoint_url=f"http://{HOST}",
        region_name="eu-west-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}),
    )
    expired.meta.events.register("before-send.sqs", _in_process)
    with pytest.raises(ClientError) as refused:
        expired.list_queues()
    assert _code(refused) == "ExpiredToken"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_attributes_map_onto_sluice_settings_and_refusals_change_nothing(sqs, engine, queue_name):
    dlq = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:eu-west-1:000000000000:{queue_name}-dlq"
    url = sqs.create_queue(
        QueueName=queue_name,
        Attributes={
            "VisibilityTimeout": "45",
            "MessageRetentionPeriod": "600",
            "DelaySeconds": "3",
            "MaximumMessageSize": "2048",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 4}),
        },
    )["QueueUrl"]
    settings = engine.queues.get(queue_name).settings
    assert (settings.visibility_timeout_ms, settings.retention_seconds, settings.delivery_delay_seconds) == (
        45_000,
        600,
        3,
    )
    assert (settings.max_message_bytes, settings.dead_letter_queue, settings.max_retries) == (
        2048,
        f"{queue_name}-dlq",
        4,
    )
    before = engine.queues.get(queue_name)
    for bad, code in (
        ({"Policy": "{}"}, "InvalidAttributeName"),
        ({"KmsMasterKeyId": "alias/x"}, "InvalidAttributeName"),
        ({"VisibilityTimeout": "50", "MaximumMessageSize": "10"}, "InvalidAttributeValue"),
        ({"FifoQueue": "true"}, "InvalidAttributeName"),
        ({"QueueArn": "x"}, "InvalidAttributeName"),
        ({"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),
    ):
        with pytest.raises(ClientError) as refused:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=bad)
        assert _code(refused) == code, bad
    assert engine.queues.get(queue_name) == before
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert engine.queues.get(queue_name).settings.dead_letter_queue is None


def test_bad_messages_are_refused_and_store_nothing(sqs, engine, queue_name):
    url = sqs.create_queue(QueueName=queue_name, Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    for send, code in (
        ({"MessageBody": "bad \x01 char"}, "InvalidMessageContents"),
        ({"MessageBody": "x" * 1025}, "InvalidParameterValue"),
        ({"MessageBody": "x", "DelaySeconds": 901}, "InvalidParameterValue"),
        ({"MessageBody": "x", "MessageDeduplicationId": "d"}, "InvalidParameterValue"),
        (
            {
                "MessageBody": "x",
                "MessageAttributes": {"sluice-x": {"DataType": "String", "StringValue": "v"}},
            },
            "InvalidParameterValue",
        ),
        (
            {"MessageBody": "x", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "abc"}}},
            "InvalidParameterValue",
        ),
        (
            {
                "MessageBody": "x",
                "MessageAttributes": {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)},
            },
            "InvalidParameterValue",
        ),
    ):
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=url, **send)
        assert _code(refused) == code, send
    batch = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "ok", "MessageBody": "fine"}, {"Id": "bad", "MessageBody": "\x00"}]
    )
    assert [e["Id"] for e in batch["Successful"]] == ["ok"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in batch["Failed"]] == [
        ("bad", "InvalidMessageContents", True)
    ]
    assert engine.operations.metrics(queue_name)["backlog_count"] == 1


def test_a_message_reads_the_same_on_the_native_face(sqs, engine, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(
        QueueUrl=url,
        MessageBody="payload",
        MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}},
    )
    pulled = engine.consumer.pull(queue_name, group="default", batch_size=10)
    assert [(d.body, d.content_type, d.attributes["k"]) for d in pulled.messages] == [
        (b"payload", "text", "v")
    ]
    engine.publisher.publish(
        queue_name, [OutgoingMessage(body=b'{"a":1}', content_type="json", attributes={"x": "y"})]
    )
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert [(m["Body"], m["MessageAttributes"]) for m in got] == [
        ('{"a":1}', {"x": {"DataType": "String", "StringValue": "y"}})
    ]


def test_fifo_deduplication_scoped_per_message_group(sqs, queue_name):
    url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo",
        Attributes={"FifoQueue": "true", "DeduplicationScope": "messageGroup"},
    )["QueueUrl"]
    a = sqs.send_message(QueueUrl=url, MessageBody="1", MessageGroupId="a", MessageDeduplicationId="same")
    b = sqs.send_message(QueueUrl=url, MessageBody="2", MessageGroupId="b", MessageDeduplicationId="same")
    again = sqs.send_message(QueueUrl=url, MessageBody="3", MessageGroupId="a", MessageDeduplicationId="same")
    assert a["MessageId"] != b["MessageId"] and again["MessageId"] == a["MessageId"]
    with pytest.raises(ClientError) as standard_name:
        sqs.get_queue_url(QueueName=queue_name)  # its SQS name ends in .fifo
    assert _code(standard_name) == "AWS.SimpleQueueService.NonExistentQueue"
    with pytest.raises(ClientError) as no_dedup:
        sqs.send_message(QueueUrl=url, MessageBody="4", MessageGroupId="a")
    assert _code(no_dedup) == "InvalidParameterValue"


def test_a_consumer_group_is_a_queue_url_and_replays_from_a_start(sqs, engine, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    replay = sqs.create_queue(QueueName=f"{queue_name}@replay", tags={"sluice:start": "earliest"})["QueueUrl"]
    fresh = sqs.create_queue(QueueName=f"{queue_name}@fresh", tags={"sluice:start": "latest"})["QueueUrl"]
    assert replay.endswith(f"/000000000000/{queue_name}@replay")
    sqs.send_message(QueueUrl=url, MessageBody="after")
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=replay, MaxNumberOfMessages=10)["Messages"]] == [
        "before",
        "after",
    ]
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=fresh, MaxNumberOfMessages=10)["Messages"]] == [
        "after"
    ]
    counts = sqs.get_queue_attributes(QueueUrl=replay, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessagesNotVisible"] == "2"
    for refused in (
        lambda: sqs.send_message(QueueUrl=replay, MessageBody="x"),
        lambda: sqs.purge_queue(QueueUrl=replay),
    ):
        with pytest.raises(ClientError) as caught:
            refused()
        assert _code(caught) == "AWS.SimpleQueueService.UnsupportedOperation"
    sqs.delete_queue(QueueUrl=fresh)
    assert sorted(engine.queues.get(queue_name).groups) == ["default", "replay"]


def test_receipt_handles_are_leases_bound_to_their_queue(sqs, queue_name):
    one = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    two = sqs.create_queue(QueueName=f"{queue_name}-2")["QueueUrl"]
    sqs.send_message(QueueUrl=one, MessageBody="m")
    handle = sqs.receive_message(QueueUrl=one)["Messages"][0]["ReceiptHandle"]
    with pytest.raises(ClientError) as foreign:
        sqs.delete_message(QueueUrl=two, ReceiptHandle=handle)
    assert _code(foreign) == "ReceiptHandleIsInvalid"
    sqs.change_message_visibility(QueueUrl=one, ReceiptHandle=handle, VisibilityTimeout=0)
    newer = sqs.receive_message(QueueUrl=one, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert newer["Attributes"]["ApproximateReceiveCount"] == "2"
    with pytest.raises(ClientError) as stale:
        sqs.change_message_visibility(QueueUrl=one, ReceiptHandle=handle, VisibilityTimeout=10)
    assert _code(stale) == "AWS.SimpleQueueService.MessageNotInflight"


def test_scopes_apply_per_action(sqs, sqs_for, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    reader = sqs_for(queue_name, ("read",))
    with pytest.raises(ClientError) as cannot_send:
        reader.send_message(QueueUrl=url, MessageBody="x")
    assert _code(cannot_send) == "AccessDenied"
    sqs.send_message(QueueUrl=url, MessageBody="x")
    got = reader.receive_message(QueueUrl=url)["Messages"][0]
    with pytest.raises(ClientError) as cannot_delete:  # deleting changes state: read+write, as acks
        reader.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    assert _code(cannot_delete) == "AccessDenied"
    assert url not in sqs_for("other", ("read",)).list_queues().get("QueueUrls", [])


def _signed(sqs: Any, body: bytes, headers: dict[str, str], path: str = "/") -> AWSResponse:
    """A request an SDK would never send (its own validation stops it), signed as it would be."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=f"http://{HOST}{path}", data=body, headers=headers)
    SigV4Auth(sqs._request_signer._credentials, "sqs", "eu-west-1").add_auth(request)
    return _in_process(request.prepare())


def test_malformed_calls_get_sqs_errors_and_change_nothing(sqs, engine, queue_name):
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    json_type = {"Content-Type": "application/x-amz-json-1.0"}
    cases = [
        (b"{}", {**json_type, "X-Amz-Target": "AmazonSQS.SendMessage"}, "MissingParameter"),
        (
            json.dumps({"QueueUrl": url, "MessageBody": "x", "DelaySeconds": "soon"}).encode(),
            {**json_type, "X-Amz-Target": "AmazonSQS.SendMessage"},
            "InvalidParameterValue",
        ),
        (b"{not json", {**json_type, "X-Amz-Target": "AmazonSQS.SendMessage"}, "SerializationException"),
        (b"{}", {**json_type, "X-Amz-Target": "AmazonSQS.DropEverything"}, "InvalidAction"),
        (
            b"Action=SendMessage&MessageBody=x",
            {"Content-Type": "application/x-www-form-urlencoded"},
            "MissingParameter",
        ),
        (
            f"Action=SendMessage&QueueUrl={url}&MessageBody=x&DelaySeconds=later".encode(),
            {"Content-Type": "application/x-www-form-urlencoded"},
            "InvalidParameterValue",
        ),
    ]
    for body, headers, code in cases:
        answer = _signed(sqs, body, headers)
        assert answer.status_code == 400, (code, answer.content)
        if "X-Amz-Target" in headers:
            assert json.loads(answer.content)["__type"].endswith(f"#{code}")
            assert answer.headers["x-amzn-query-error"] == f"{code};Sender"
        else:
            assert f"<Code>{code}</Code>".encode() in answer.content
    assert engine.operations.metrics(queue_name)["backlog_count"] == 0


def test_query_protocol_clients_may_post_to_the_queue_url(sqs, engine, queue_name):
    """Older SDKs and kombu's query mode post `Action=...` forms to the queue URL itself, without QueueUrl."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    credentials = sqs._request_signer._credentials
    form = "Action=SendMessage&Version=2012-11-05&MessageBody=posted+to+the+queue+URL"
    request = AWSRequest(
        method="POST",
        url=f"http://{HOST}/000000000000/{queue_name}",
        data=form.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    SigV4Auth(credentials, "sqs", "eu-west-1").add_auth(request)
    answer = _in_process(request.prepare())
    assert answer.status_code == 200, answer.content
    assert b"<SendMessageResponse" in answer.content and b"<MD5OfMessageBody>" in answer.content
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    assert [m["Body"] for m in got] == ["posted to the queue URL"]
