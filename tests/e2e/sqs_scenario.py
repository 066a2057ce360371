"""Every SQS action through an unchanged boto3 client against a Sluice base URL, with what SQS would answer
checked. Standalone (boto3 only, no project imports): the suite runs it in a venv of its own with the
newest boto3 (AWS JSON 1.0) and with botocore 1.31.80 (the query protocol), see test_sqs_clients.py.

    python sqs_scenario.py <base url> <access key id> <secret access key> <name prefix>

Prints `actions <json list of the actions called>` and `protocol <json|query>` on success.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

CALLED: set[str] = set()


def main(url: str, key: str, secret: str, prefix: str) -> None:
    sqs = boto3.client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 2}),
    )
    sqs.meta.events.register("before-call.sqs.*", lambda model, **_: CALLED.add(model.name))
    protocol = sqs.meta.service_model.protocol

    # queues: create (idempotent), url, list (prefix, paging), attributes, tags
    dlq = sqs.create_queue(QueueName=f"{prefix}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    attrs = {"VisibilityTimeout": "30", "RedrivePolicy": policy, "DelaySeconds": "0"}
    q = sqs.create_queue(QueueName=f"{prefix}-q", Attributes=attrs, tags={"team": "a"})["QueueUrl"]
    assert sqs.create_queue(QueueName=f"{prefix}-q", Attributes=attrs)["QueueUrl"] == q
    try:
        sqs.create_queue(QueueName=f"{prefix}-q", Attributes={"VisibilityTimeout": "31"})
        raise AssertionError("a different attribute must be refused")
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "QueueAlreadyExists", exc.response
    assert sqs.get_queue_url(QueueName=f"{prefix}-q")["QueueUrl"] == q
    listed = sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"]
    assert q in listed and dlq in listed, listed
    page = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=1)
    assert len(page["QueueUrls"]) == 1 and page["NextToken"]
    rest = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=1, NextToken=page["NextToken"])
    assert rest["QueueUrls"] != page["QueueUrls"]
    sqs.set_queue_attributes(QueueUrl=q, Attributes={"ReceiveMessageWaitTimeSeconds": "1"})
    got = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["All"])["Attributes"]
    assert (
        got["ReceiveMessageWaitTimeSeconds"] == "1"
        and json.loads(got["RedrivePolicy"])["maxReceiveCount"] == 2
    )
    sqs.tag_queue(QueueUrl=q, Tags={"env": "test"})
    sqs.untag_queue(QueueUrl=q, TagKeys=["team"])
    assert sqs.list_queue_tags(QueueUrl=q)["Tags"] == {"env": "test"}
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [q]

    # messages: MD5s, attributes with types, system attributes, batches, visibility, deletes
    attributes = {
        "n": {"DataType": "Number", "StringValue": "42"},
        "s": {"DataType": "String.custom", "StringValue": "é"},
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff"},
    }
    sent = sqs.send_message(QueueUrl=q, MessageBody="hello <SQS> & ü", MessageAttributes=attributes)
    assert sent["MD5OfMessageBody"] == hashlib.md5("hello <SQS> & ü".encode()).hexdigest()
    batch = sqs.send_message_batch(
        QueueUrl=q,
        Entries=[{"Id": "a", "MessageBody": "one"}, {"Id": "b", "MessageBody": "two", "DelaySeconds": 0}],
    )
    assert sorted(e["Id"] for e in batch["Successful"]) == ["a", "b"] and not batch.get("Failed")
    got_messages = []
    deadline = time.time() + 20
    while len(got_messages) < 3 and time.time() < deadline:
        got_messages += sqs.receive_message(
            QueueUrl=q,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            WaitTimeSeconds=1,
        ).get("Messages", [])
    bodies = {msg["Body"]: msg for msg in got_messages}
    assert set(bodies) == {"hello <SQS> & ü", "one", "two"}, bodies
    first = bodies["hello <SQS> & ü"]
    assert (
        first["MessageAttributes"] == attributes
        and first["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    )
    assert first["Attributes"]["ApproximateReceiveCount"] == "1" and first["Attributes"]["SenderId"] == key
    sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=60)
    changed = sqs.change_message_visibility_batch(
        QueueUrl=q,
        Entries=[{"Id": "x", "ReceiptHandle": bodies["one"]["ReceiptHandle"], "VisibilityTimeout": 0}],
    )
    assert [e["Id"] for e in changed["Successful"]] == ["x"]
    again = sqs.receive_message(QueueUrl=q, AttributeNames=["ApproximateReceiveCount"], WaitTimeSeconds=2)
    assert (
        again["Messages"][0]["Body"] == "one"
        and again["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "2"
    )
    sqs.delete_message(QueueUrl=q, ReceiptHandle=first["ReceiptHandle"])
    deleted = sqs.delete_message_batch(
        QueueUrl=q,
        Entries=[
            {"Id": "one", "ReceiptHandle": again["Messages"][0]["ReceiptHandle"]},
            {"Id": "two", "ReceiptHandle": bodies["two"]["ReceiptHandle"]},
            {"Id": "bad", "ReceiptHandle": "made-up"},
        ],
    )
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["one", "two"]
    assert [(e["Id"], e["Code"]) for e in deleted["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    try:
        sqs.delete_message(QueueUrl=q, ReceiptHandle="made-up")
        raise AssertionError("a made-up receipt handle must be refused")
    except sqs.exceptions.ReceiptHandleIsInvalid:
        pass
    try:
        sqs.send_message_batch(QueueUrl=q, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)])
        raise AssertionError("11 entries must be refused")
    except sqs.exceptions.TooManyEntriesInBatchRequest:
        pass

    # dead letters: two receives without a delete move a message to the DLQ; a move task brings it back
    sqs.send_message(QueueUrl=q, MessageBody="poison")
    for _ in range(3):
        for msg in sqs.receive_message(QueueUrl=q, WaitTimeSeconds=1).get("Messages", []):
            sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=msg["ReceiptHandle"], VisibilityTimeout=0)
    dead = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=2, AttributeNames=["All"])["Messages"]
    assert [d["Body"] for d in dead] == ["poison"], dead
    assert dead[0]["Attributes"]["DeadLetterQueueSourceArn"].endswith(f":{prefix}-q")
    sqs.change_message_visibility(QueueUrl=dlq, ReceiptHandle=dead[0]["ReceiptHandle"], VisibilityTimeout=0)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    tasks = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
    assert tasks[0]["Status"] == "COMPLETED" and tasks[0]["ApproximateNumberOfMessagesMoved"] == 1, tasks
    try:
        sqs.cancel_message_move_task(TaskHandle=handle)
        raise AssertionError("a finished task cannot be cancelled")
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "ResourceNotFoundException"
    back = sqs.receive_message(QueueUrl=q, WaitTimeSeconds=2)["Messages"]
    assert [b["Body"] for b in back] == ["poison"]

    # consumer groups: a group is a queue URL of its own and receives every message
    group = sqs.create_queue(QueueName=f"{prefix}-q@audit", tags={"sluice:start": "latest"})["QueueUrl"]
    sqs.send_message(QueueUrl=q, MessageBody="fan-out")
    seen = sqs.receive_message(QueueUrl=group, WaitTimeSeconds=2)["Messages"]
    assert [s["Body"] for s in seen] == ["fan-out"]
    assert group in sqs.list_queues(QueueNamePrefix=f"{prefix}-q@")["QueueUrls"]
    sqs.delete_queue(QueueUrl=group)

    # permissions: refused with a clear error; purge; delete
    for call in (
        lambda: sqs.add_permission(
            QueueUrl=q, Label="l", AWSAccountIds=["123456789012"], Actions=["SendMessage"]
        ),
        lambda: sqs.remove_permission(QueueUrl=q, Label="l"),
    ):
        try:
            call()
            raise AssertionError("permissions are not supported")
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "AWS.SimpleQueueService.UnsupportedOperation", (
                exc.response
            )
    sqs.purge_queue(QueueUrl=q)
    try:
        sqs.purge_queue(QueueUrl=q)
        raise AssertionError("a second purge within 60 s must be refused")
    except sqs.exceptions.PurgeQueueInProgress:
        pass
    counts = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"
    ]
    assert counts["ApproximateNumberOfMessages"] == "0", counts
    sqs.delete_queue(QueueUrl=q)
    sqs.delete_queue(QueueUrl=dlq)
    try:
        sqs.get_queue_url(QueueName=f"{prefix}-q")
        raise AssertionError("deleted")
    except sqs.exceptions.QueueDoesNotExist:
        pass
    print("actions", json.dumps(sorted(CALLED)))
    print("protocol", protocol, botocore.__version__)


if __name__ == "__main__":
    main(*sys.argv[1:5])
