"""The shard-map mirror within SSM's limits: values over 4 KB are split over Standard parameters, a
parameter an older version made Advanced takes small documents, and readers never mix two documents.

AWS refuses Standard values over 4,096 B, Advanced ones over 8,192 B, and never downgrades an Advanced
parameter to Standard; moto is patched to refuse all three the same way (sluice/local/moto_patches.py).
"""

from __future__ import annotations

import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sluice.adapters import aws
from sluice.adapters.ssm import ADVANCED_MAX_BYTES, STANDARD_MAX_BYTES, SsmMirror, split, tag_of, tier_for
from sluice.local import moto_patches


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


def test_moto_refuses_values_over_the_tier_limits_as_aws_does(aws_env: None) -> None:
    ssm = aws.client("ssm")
    name = f"/sluice/test/size-check/{uuid.uuid4().hex[:8]}"
    ssm.put_parameter(Name=name, Value="x" * STANDARD_MAX_BYTES, Type="String", Tier="Standard")
    ssm.put_parameter(Name=name + "a", Value="x" * ADVANCED_MAX_BYTES, Type="String", Tier="Advanced")
    for tier, size in (("Standard", STANDARD_MAX_BYTES + 1), ("Advanced", ADVANCED_MAX_BYTES + 1)):
        with pytest.raises(ClientError) as caught:
            ssm.put_parameter(Name=name + "b", Value="x" * size, Type="String", Tier=tier, Overwrite=True)
        assert aws.error_code(caught.value) == "ValidationException"
    with pytest.raises(ClientError):  # bytes, not characters
        ssm.put_parameter(Name=name + "c", Value="é" * 2049, Type="String", Tier="Standard")


def test_a_legacy_advanced_parameter_takes_a_small_document_and_stays_advanced(aws_env: None) -> None:
    """An older version wrote documents over 4 KB as one Advanced parameter; AWS never downgrades it."""
    queue = f"q-{uuid.uuid4().hex[:10]}"
    writer = SsmMirror("/sluice/test/shard-maps")
    aws.client("ssm").put_parameter(
        Name=writer.name(queue), Value="x" * (STANDARD_MAX_BYTES + 100), Type="String", Tier="Advanced"
    )
    writer.write(queue, '{"shards": 1}')  # a container that has never seen it: AWS tells it
    assert writer.read(queue) == '{"shards": 1}'
    assert _tier(writer, queue) == "Advanced"
    moto_patches.refill_ssm_quota()  # a second later: three puts spent the PutParameter quota (3/s)
    writer.write(queue, '{"shards": 2}')  # and now it knows
    assert writer.read(queue) == '{"shards": 2}'


def test_a_document_over_4kb_is_split_over_standard_parameters_and_read_whole(aws_env: None) -> None:
    queue = f"q-{uuid.uuid4().hex[:10]}"
    mirror = SsmMirror("/sluice/test/shard-maps")
    big = "".join(f"{i:05d}" for i in range(5000))  # 25,000 B: 7 parts
    mirror.write(queue, big)
    assert mirror.read(queue) == big
    assert _tier(mirror, queue) == "Standard"
    names = [mirror.part_name(mirror.name(queue), i) for i in range(7)]
    values = aws.client("ssm").get_parameters(Names=names)["Parameters"]
    assert len(values) == 7 and all(len(p["Value"].encode()) <= STANDARD_MAX_BYTES for p in values)
    moto_patches.refill_ssm_quota()  # a few seconds later: 8 puts spent the PutParameter quota (3/s)
    mirror.write(queue, "small again")
    assert mirror.read(queue) == "small again"
    moto_patches.refill_ssm_quota()
    mirror.write(queue, big[::-1])
    mirror.delete(queue)
    assert mirror.read(queue) is None
    assert aws.client("ssm").get_parameters(Names=names)["Parameters"] == []


def test_a_reader_never_mixes_the_parts_of_two_documents(aws_env: None) -> None:
    queue = f"q-{uuid.uuid4().hex[:10]}"
    mirror = SsmMirror("/sluice/test/shard-maps")
    first, second = "a" * 9000, "b" * 9000
    mirror.write(queue, first)
    # A writer of `second` died after its first part: the header still names `first`'s tag.
    aws.client("ssm").put_parameter(
        Name=mirror.part_name(mirror.name(queue), 0), Value=tag_of(second) + "b" * 10, Type="String",
        Overwrite=True,
    )  # fmt: skip
    assert mirror.read(queue) is None  # the caller then reads the control item


def test_split_never_cuts_a_character() -> None:
    text = "aé" * 3000
    parts = split(text, 1001)
    assert "".join(parts) == text
    assert all(len(p.encode()) <= 1001 for p in parts)


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


def test_moto_throttles_reads_and_writes_over_the_account_quota_as_aws_does(aws_env: None) -> None:
    """GetParameter/GetParameters/GetParametersByPath share 40 TPS; PutParameter has its own (3 TPS).
    Without retries the 41st read in a burst is refused with the code botocore retries on."""
    import botocore.session
    from botocore.config import Config

    name = f"/sluice/test/tps/{uuid.uuid4().hex[:8]}"
    ssm = aws.client("ssm")
    ssm.put_parameter(Name=name, Value="v", Type="String")
    bare = botocore.session.get_session().create_client(
        "ssm", region_name="us-east-1", config=Config(retries={"total_max_attempts": 1})
    )
    outcomes = []
    started = time.monotonic()
    for call in range(150):
        try:
            if call % 3 == 0:
                bare.get_parameter(Name=name)
            elif call % 3 == 1:
                bare.get_parameters(Names=[name])
            else:
                bare.get_parameters_by_path(Path=name.rsplit("/", 1)[0])
            outcomes.append("ok")
        except ClientError as exc:
            outcomes.append(aws.error_code(exc))
    elapsed = time.monotonic() - started
    assert outcomes.count("ok") <= moto_patches.SSM_READ_TPS * (1 + elapsed)  # one second's burst, then 40/s
    assert "ThrottlingException" in outcomes
    puts = []
    for i in range(6):
        try:
            bare.put_parameter(Name=name, Value=str(i), Type="String", Overwrite=True)
            puts.append("ok")
        except ClientError as exc:
            puts.append(aws.error_code(exc))
    assert puts.count("ok") <= moto_patches.SSM_PUT_TPS + 1 and "ThrottlingException" in puts
    assert ssm.get_parameter(Name=name)["Parameter"]["Value"]  # the engine's client retries through
