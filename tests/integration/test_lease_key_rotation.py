"""The lease-signing key lives in Secrets Manager and rotates without invalidating live leases."""

from __future__ import annotations

import json

import boto3
import pytest

from sluice import constants as c
from sluice.cli import main
from sluice.models import OutgoingMessage
from sluice.service import Sluice


@pytest.fixture
def own_secret(settings, queue_name):
    """A lease-key secret of this test's own (rotating the session's would age other tests' keys)."""
    sm = boto3.client("secretsmanager")
    value = json.dumps({"current_id": 1, "current": "a" * 64})
    arn = sm.create_secret(Name=f"sluice/test/{queue_name}", SecretString=value)["ARN"]
    return settings.model_copy(update={"lease_key_secret": arn})


def test_the_provisioned_secret_holds_the_key_and_the_control_table_does_not(settings, engine):
    value = json.loads(
        boto3.client("secretsmanager").get_secret_value(SecretId=settings.lease_key_secret)["SecretString"]
    )
    assert value["current_id"] == 1 and len(value["current"]) == 64
    assert engine.backend.control.get("SECRET", "LEASE") is None  # no plaintext key in the table any more
    assert settings.to_env()[c.ENV_LEASE_KEY_SECRET] == settings.lease_key_secret


def test_rotation_keeps_live_leases_valid(own_secret, queue_name, capsys, monkeypatch):
    before = Sluice.from_settings(own_secret)
    before.queues.create(queue_name)
    before.publisher.publish(queue_name, [OutgoingMessage(body=f"{n}".encode()) for n in range(3)])
    old = before.consumer.pull(queue_name, group="default", batch_size=1).messages[0]

    monkeypatch.delenv(c.ENV_AWS_ENDPOINT_URL, raising=False)
    main(["lease-key", "rotate", "--secret-id", own_secret.lease_key_secret, "--json"])
    rotated = json.loads(capsys.readouterr().out)
    assert rotated["current_id"] == 2 and rotated["previous_id"] == 1

    after = Sluice.from_settings(own_secret)  # a container that started after the rotation
    new = after.consumer.pull(queue_name, group="default", batch_size=1).messages[0]
    assert new.lease_id[:4] != old.lease_id[:4]  # another key id in the header
    # A container still holding the old secret value (cache TTL) verifies the new key's leases too:
    # it re-reads the secret when it meets a key id it does not know.
    third = after.consumer.pull(queue_name, group="default", batch_size=1).messages[0]
    assert before.consumer.ack(queue_name, [third.lease_id]).ack_count == 1
    # and the lease handed out before the rotation still acks on the new container
    result = after.consumer.ack(queue_name, [old.lease_id, new.lease_id])
    assert result.ack_count == 2 and not result.warnings
