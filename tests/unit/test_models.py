import pytest

from sluice import errors
from sluice.engine.auth import Principal
from sluice.engine.queues import parse_settings
from sluice.names import check_queue_name
from sluice.offsets import decode, encode


def test_offsets_are_32_digits_and_sort_in_publish_order():
    a, b, c = encode(1_700_000_000_000, 9), encode(1_700_000_000_000, 10), encode(1_700_000_000_001, 11)
    assert len(a) == 32 and a < b < c
    assert decode(b) == (1_700_000_000_000, 10)


@pytest.mark.parametrize("name", ["", "a" * 64, "has space", "slash/no", "ü"])
def test_invalid_queue_names(name):
    with pytest.raises(errors.InvalidQueueName):
        check_queue_name(name)


@pytest.mark.parametrize(
    "raw",
    [
        {"max_retries": 101},
        {"visibility_timeout_ms": 0},
        {"max_message_bytes": 2_000_000},
        {"delivery_delay_seconds": 86_401},
        {"min_shards": 5, "max_shards": 2},
        {"retention_seconds": 2_000_000},
        {"unknown_setting": 1},
    ],
)
def test_invalid_settings_are_rejected_with_a_sentence(raw):
    with pytest.raises(errors.InvalidSettings, match="invalid setting"):
        parse_settings(raw)


def test_settings_defaults_follow_the_contract():
    s = parse_settings({})
    assert (s.retention_seconds, s.visibility_timeout_ms, s.max_retries, s.max_message_bytes) == (
        345_600,
        30_000,
        3,
        131_072,
    )
    assert parse_settings({"retention_seconds": 5_000_000, "bottomless": True}).bottomless


def test_principal_scopes_and_queue_binding():
    reader = Principal("t", "orders", frozenset({"read"}))
    assert reader.allows("read", "orders")
    assert not reader.allows("write", "orders")
    assert not reader.allows("read", "payments")
    admin = Principal("a", "*", frozenset({"admin"}))
    assert admin.allows("write", "anything") and admin.allows("admin", None)
    queue_admin = Principal("q", "orders", frozenset({"admin"}))
    assert queue_admin.allows("write", "orders") and not queue_admin.allows("read", "payments")


def test_a_document_written_before_regions_parses_with_its_single_region_fence():
    from sluice.models import Queue

    old = Queue.model_validate_json(
        '{"name": "q", "settings": {}, "created_ms": 1, "incarnation": "ab", "version": 3, "fence": 7,'
        ' "shards": [{"id": 0, "table": 0, "created_ms": 1}], "next_shard_id": 1}'
    )
    assert (old.fence_of(None), old.fences, old.shards[0].region) == (7, {}, None)
    assert old.fence_of("eu-west-1") == 0  # a region's coordinator that never wrote it
    fenced = old.with_fence("eu-west-1", 4).with_fence(None, 8)
    assert (fenced.fence_of("eu-west-1"), fenced.fence_of("us-east-1"), fenced.fence) == (4, 0, 8)


def test_new_shards_take_ids_no_region_has_had():
    from sluice.models import Queue

    queue = Queue(name="q", settings=parse_settings({}), created_ms=1, incarnation="ab", next_shard_id=5)
    grown = queue.with_new_shards(2, "eu-west-1", 4, 9).with_new_shards(1, None, 4, 10)
    assert [(s.id, s.table, s.region, s.created_ms) for s in grown.shards] == [
        (5, 1, "eu-west-1", 9),
        (6, 2, "eu-west-1", 9),
        (7, 3, None, 10),
    ]
    assert grown.next_shard_id == 8


def test_per_region_coordinator_keys():
    from sluice.engine import keys

    assert keys.coordinator_ownership_sk("LEASE", None) == "LEASE"  # single region: the item it always was
    assert keys.coordinator_ownership_sk("LEASE", "eu-west-1") == "LEASE#eu-west-1"
    assert keys.coordinator_state_sk("q", None) == "STATE#q"
    assert keys.coordinator_state_sk("q", "eu-west-1") == "STATE#eu-west-1#q"
    assert (keys.fence_attribute(None), keys.fence_attribute("eu-west-1")) == ("fence", "fence#eu-west-1")
