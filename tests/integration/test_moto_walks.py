"""moto's Query and Scan iterate a table's item dicts; a write adding an item meanwhile made them raise
"dictionary changed size during iteration" (a puller thread of test_engine.py died of it in CI).
DynamoDB never answers that, so sluice/local/moto_patches.py serializes them with moto's writes."""

from __future__ import annotations

import sys
import threading

import boto3
import pytest


@pytest.fixture
def eager_thread_switches():
    """Threads switch every microsecond instead of every 5 ms, so the race shows within a second."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_queries_and_scans_survive_concurrent_inserts(aws, eager_thread_switches):
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName="walks",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    done = threading.Event()
    failures: list[BaseException] = []

    for start in range(0, 2_000, 25):  # the longer the walk, the wider the window for an insert
        items = [{"pk": {"S": f"old{i}"}, "sk": {"N": "0"}} for i in range(start, start + 25)]
        requests = [{"PutRequest": {"Item": item}} for item in items]
        client.batch_write_item(RequestItems={"walks": requests})

    def insert() -> None:
        for i in range(300):
            client.put_item(TableName="walks", Item={"pk": {"S": f"new{i}"}, "sk": {"N": "0"}})
        done.set()

    def walk() -> None:
        try:
            while not done.is_set():
                client.query(
                    TableName="walks",
                    KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": "old1"}},
                )
                client.scan(TableName="walks", Limit=10)
        except Exception as exc:  # the thread's error is the test's finding
            failures.append(exc)

    threads = [threading.Thread(target=insert), *(threading.Thread(target=walk) for _ in range(2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
