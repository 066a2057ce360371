"""Paths whose AWS calls the deployed roles once lacked, run through the real handlers so the IAM call
audit (tests/conftest.py, sluice/local/iamcheck.py) checks them against the template:
- the consumer moving a message stored in `overflow/` (> DynamoDB's item size) to a dead letter queue
  writes a new overflow body: s3:PutObject on `overflow/*`;
- a push consumer of type `lambda` invokes its function: lambda:InvokeFunction on the push targets;
- a dead letter queue deleted since it was configured is created again by the coordinator (the control
  path: ssm:PutParameter on the shard-map path), never by the consumer, which may only read shard maps;
- payload-tier objects (`payload/*`, written with their lifecycle tag): sent by the broker, read by the
  consumer's peeks and pulls, written by its dead-letter moves, read and written again by the broker's
  redrive.
And the auto-created dead letter queue takes the large message its source accepted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sluice import constants as c
from sluice.engine import deadletter
from sluice.local import iamcheck
from sluice.local.workers import invoke

BIG = 300_000  # stored in S3 overflow/: over what one DynamoDB item holds


def _recorded(function: str, action: str) -> list[str]:
    calls = iamcheck.load_calls(Path(os.environ[c.ENV_IAM_AUDIT_FILE]))
    return [call.resource for call in calls if call.function == function and call.action == action]


def test_dead_lettering_an_overflow_message(api, queue_name):
    dlq = f"{queue_name}-dlq"
    settings = {"max_message_bytes": 400_000, "max_retries": 1, "dead_letter_queue": dlq}
    assert api("POST", "/v1/queues", {"queue_name": queue_name, "settings": settings})[0] == 201
    # The auto-created DLQ accepts what its source accepts.
    status, body = api("GET", f"/v1/queues/{dlq}")
    assert status == 200, body
    assert body["result"]["settings"]["max_message_bytes"] == 400_000

    text = "x" * BIG
    status, body = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": text}]})
    assert status == 200, body
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200, body
    (message,) = body["result"]["messages"]
    retry = {"retries": [{"lease_id": message["lease_id"]}]}
    assert api("POST", f"/v1/queues/{queue_name}/messages/ack", retry)[0] == 200
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200 and body["result"]["messages"] == [], body

    status, body = api("POST", f"/v1/queues/{dlq}/messages/pull", {"batch_size": 1})
    assert status == 200, body
    (dead,) = body["result"]["messages"]
    assert dead["body"] == text
    puts = _recorded(c.FN_CONSUMER, "s3:PutObject")
    assert any(":::sluice-test-segments-123456789012-us-east-1/overflow/" in arn for arn in puts), puts


def test_a_deleted_dead_letter_queue_is_created_again_by_the_coordinator(api, queue_name, monkeypatch):
    monkeypatch.setattr(deadletter, "RETRY_MS", 0)  # look for the dead letter queue again at once
    dlq = f"{queue_name}-dlq"
    settings = {"max_retries": 0, "dead_letter_queue": dlq}
    assert api("POST", "/v1/queues", {"queue_name": queue_name, "settings": settings})[0] == 201
    assert api("DELETE", f"/v1/queues/{dlq}")[0] == 200
    assert api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": "late"}]})[0] == 200
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200, body
    (message,) = body["result"]["messages"]
    retry = {"retries": [{"lease_id": message["lease_id"]}]}
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/ack", retry)
    assert status == 200, body
    # The consumer kept the message (undelivered: it is out of deliveries) and created nothing.
    assert api("GET", f"/v1/queues/{dlq}")[0] == 404
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200 and body["result"]["messages"] == [] and body["result"]["message_backlog_count"] == 1

    invoke(c.FN_COORDINATOR, {"kind": "coordinator.run", "loop_seconds": 0})
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200 and body["result"]["messages"] == [], body  # this pull moved it
    status, body = api("POST", f"/v1/queues/{dlq}/messages/pull", {"batch_size": 1})
    assert status == 200, body
    assert [m["body"] for m in body["result"]["messages"]] == ["late"]
    assert any(arn.endswith(f"/{dlq}") for arn in _recorded(c.FN_COORDINATOR, "ssm:PutParameter"))
    assert not _recorded(c.FN_CONSUMER, "ssm:PutParameter")


def test_payload_tier_objects_through_sends_pulls_dead_letters_and_redrive(api, queue_name):
    dlq = f"{queue_name}-dlq"
    settings = {"payload_tier": "s3", "max_retries": 1, "dead_letter_queue": dlq}
    assert api("POST", "/v1/queues", {"queue_name": queue_name, "settings": settings})[0] == 201
    text = os.urandom(32 * 1024).hex()  # 64 KB that compresses to 32 KB: the dead letter queue's auto tier
    status, body = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": text}]})
    assert status == 200, body
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/peek", {"batch_size": 1})
    assert status == 200 and [m["body"] for m in body["result"]["messages"]] == [text], body
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200, body
    (message,) = body["result"]["messages"]
    assert message["body"] == text
    retry = {"retries": [{"lease_id": message["lease_id"]}]}
    assert api("POST", f"/v1/queues/{queue_name}/messages/ack", retry)[0] == 200
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200 and body["result"]["messages"] == [], body  # this pull moved it
    status, body = api("POST", f"/v1/queues/{queue_name}/redrive", {"from": dlq})
    assert status == 200 and body["result"]["moved"] == 1, body
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    assert status == 200 and [m["body"] for m in body["result"]["messages"]] == [text], body

    def tier(function: str, action: str) -> list[str]:
        return [arn for arn in _recorded(function, action) if f"/{c.PAYLOAD_PREFIX}" in arn]

    for action in ("s3:PutObject", "s3:PutObjectTagging", "s3:GetObject"):
        assert tier(c.FN_BROKER, action), action  # the send; the redrive reads and writes one again
        assert tier(c.FN_CONSUMER, action), action  # peek and pulls; the dead-letter move writes one


def test_push_to_a_lambda_target_invokes_it_from_the_consumer(api, queue_name):
    target = "arn:aws:lambda:us-east-1:123456789012:function:sluice-test-push-orders"
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    consumer = {"id": "to-lambda", "type": "lambda", "function_arn": target, "max_batch_timeout_ms": 0}
    status, body = api("POST", f"/v1/queues/{queue_name}/consumers", consumer)
    assert status == 201, body
    assert api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": "hi"}]})[0] == 200

    from sluice.local.workers import FunctionConfig, invoke

    event = {"push": {"queue": queue_name, "consumer_id": "to-lambda", "slot": 0}}
    report = invoke(c.FN_CONSUMER, event, FunctionConfig(timeout_seconds=40))
    # moto cannot run the function (no Docker), so the batch is not delivered; the call was made.
    assert report["failed"] >= 1, json.dumps(report)
    assert target in _recorded(c.FN_CONSUMER, "lambda:InvokeFunction")


def test_auto_created_dead_letter_queue_copies_what_bounds_acceptance(engine, queue_name):
    dlq = f"{queue_name}-dlq"
    source = {
        "max_message_bytes": 1_048_576,
        "bottomless": True,
        "retention_seconds": 3_000_000,
        "max_shards": 8,
        "max_retries": 7,
        "dead_letter_queue": dlq,
    }
    engine.queues.create(queue_name, source)
    made = engine.queues.get(dlq).settings
    assert (made.max_message_bytes, made.bottomless, made.retention_seconds, made.max_shards) == (
        1_048_576,
        True,
        3_000_000,
        8,
    )
    assert made.max_retries == 3 and made.dead_letter_queue is None  # delivery settings: defaults
    # A queue that already exists is the user's: naming it as a DLQ does not change it.
    own = f"{queue_name}-own"
    engine.queues.create(own, {"max_message_bytes": 1000})
    engine.queues.create(f"{queue_name}-b", {"max_message_bytes": 50_000, "dead_letter_queue": own})
    assert engine.queues.get(own).settings.max_message_bytes == 1000


def test_large_messages_exhausted_together_all_reach_the_dead_letter_queue(clocked, clock, queue_name):
    """Four 300 KB messages retried out at once: 1.2 MB, more than one send request carries (1 MiB).
    The DLQ publish is split by bytes, so none is refused; redrive moves them back the same way."""
    from sluice.models import OutgoingMessage

    dlq = f"{queue_name}-dlq"
    clocked.queues.create(
        queue_name, {"max_message_bytes": 400_000, "max_retries": 1, "dead_letter_queue": dlq}
    )
    for i in range(4):  # one request each: 4 x 300 KB is over the request limit too
        clocked.publisher.publish(
            queue_name, [OutgoingMessage(body=f"{i}".encode() * 300_000, content_type="text")]
        )
    pulled = clocked.consumer.pull(queue_name, group="default", batch_size=10).messages
    assert len(pulled) == 4
    from sluice.engine.consume import RetryRequest

    clocked.consumer.ack(queue_name, [], [RetryRequest(d.lease_id) for d in pulled])
    assert clocked.consumer.pull(queue_name, group="default", batch_size=10).messages == []
    dead = clocked.consumer.pull(dlq, group="default", batch_size=10, visibility_ms=1).messages
    assert sorted(len(d.body) for d in dead) == [300_000] * 4
    clock.advance(10)
    assert clocked.operations.redrive(queue_name, dlq)["moved"] == 4


def test_redriving_an_overflow_message_reads_its_body_from_the_broker(api, queue_name):
    """Redrive (a broker route) pulls the dead letter queue and sends again: a body stored in `overflow/`
    is read back by the broker (s3:GetObject on overflow/*)."""
    dlq = f"{queue_name}-dlq"
    settings = {"max_message_bytes": 400_000, "max_retries": 0, "dead_letter_queue": dlq}
    assert api("POST", "/v1/queues", {"queue_name": queue_name, "settings": settings})[0] == 201
    text = "y" * BIG
    assert api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": text}]})[0] == 200
    (message,) = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})[1]["result"][
        "messages"
    ]
    retry = {"retries": [{"lease_id": message["lease_id"]}]}
    assert api("POST", f"/v1/queues/{queue_name}/messages/ack", retry)[0] == 200  # no retries left: dead

    status, body = api("POST", f"/v1/queues/{queue_name}/redrive", {"from_queue": dlq})
    assert status == 200 and body["result"]["moved"] == 1, body
    (back,) = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})[1]["result"][
        "messages"
    ]
    assert back["body"] == text
    gets = _recorded(c.FN_BROKER, "s3:GetObject")
    assert any("/overflow/" in arn for arn in gets), gets
