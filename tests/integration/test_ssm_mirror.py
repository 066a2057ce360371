"""The shard-map mirror survives a document shrinking back under 4 KB (a scale-down from ~50 shards).

AWS never downgrades an Advanced parameter to Standard; moto is patched to refuse it the same way
(sluice/local/moto_patches.py), so the first test fails on a mirror that sends Standard for small
documents once the parameter is Advanced.
"""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from sluice.adapters import aws
from sluice.adapters.ssm import STANDARD_MAX_BYTES, SsmMirror, tier_for


def _tier(mirror: SsmMirror, queue: str) -> str:
    ssm = aws.client("ssm")
    (param,) = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [mirror.name(queue)]}])[
        "Parameters"
    ]
    return param["Tier"]


def test_moto_refuses_the_downgrade_as_aws_does(aws_env: None) -> None:
    ssm = aws.client("ssm")
    name = f"/sluice/test/tier-check/{uuid.uuid4().hex[:8]}"
    ssm.put_parameter(Name=name, Value="x" * 5000, Type="String", Tier="Advanced")
    with pytest.raises(ClientError) as caught:
        ssm.put_parameter(Name=name, Value="small", Type="String", Overwrite=True, Tier="Standard")
    assert aws.error_code(caught.value) == "ValidationException"


def test_a_shrunk_document_is_written_and_the_parameter_stays_advanced(aws_env: None) -> None:
    queue = f"q-{uuid.uuid4().hex[:10]}"
    writer = SsmMirror("/sluice/test/shard-maps")
    writer.write(queue, "x" * (STANDARD_MAX_BYTES + 100))  # ~50 shards: over 4 KB
    assert _tier(writer, queue) == "Advanced"
    writer.write(queue, '{"shards": 1}')  # the same container after a scale-down
    assert writer.read(queue) == '{"shards": 1}'
    # Another container (a fresh mirror object) has never seen the parameter: AWS tells it.
    other = SsmMirror("/sluice/test/shard-maps")
    other.write(queue, '{"shards": 2}')
    assert other.read(queue) == '{"shards": 2}'
    assert _tier(other, queue) == "Advanced"


def test_small_documents_stay_standard(aws_env: None) -> None:
    queue = f"q-{uuid.uuid4().hex[:10]}"
    mirror = SsmMirror("/sluice/test/shard-maps")
    mirror.write(queue, "{}")
    mirror.write(queue, '{"a": 1}')
    assert _tier(mirror, queue) == "Standard"


@pytest.mark.parametrize(
    ("size", "known_advanced", "tier"),
    [
        (10, False, "Standard"),
        (STANDARD_MAX_BYTES, False, "Standard"),
        (STANDARD_MAX_BYTES + 1, False, "Advanced"),
        (10, True, "Advanced"),  # never downgrade
    ],
)
def test_tier_decision(size: int, known_advanced: bool, tier: str) -> None:
    assert tier_for(size, known_advanced=known_advanced) == tier


@pytest.fixture
def aws_env(aws: None) -> None:
    """The session's in-process moto, with default endpoints (no local server)."""
    aws_module_clients = aws  # noqa: F841 - the fixture starts mock_aws for the session
