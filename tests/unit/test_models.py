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
