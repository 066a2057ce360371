"""The bench's one item-size implementation (bench/units.py) against DynamoDB's documented rules
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html),
and the payloads and prices the cost report is built from."""

import json

import pytest

from bench import prices
from bench.payloads import EVENT_MAX_BYTES, EVENT_MIN_BYTES, EVENTS, RANDOM_200
from bench.units import item_size, number_size, read_units, value_size, write_units


def test_strings_and_binary_count_utf8_and_raw_bytes():
    assert value_size({"S": "héllo"}) == 6  # é is two UTF-8 bytes
    assert value_size({"B": b"\x00" * 10}) == 10
    assert value_size({"B": "AAAAAAAAAAAAAA=="}) == 10  # base64 on the wire, raw length counted
    assert item_size({"näme": {"S": "x"}}) == 5 + 1  # attribute names are UTF-8 too


@pytest.mark.parametrize(
    ("number", "size"),
    [
        ("123", 3),  # 3 significant digits: ceil(3 / 2) + 1
        ("1700000000000", 2),  # trailing zeros trimmed: "17"
        ("0.0050", 2),  # leading and trailing zeros trimmed: "5"
        ("-12345.6789", 6),  # 9 digits: ceil(9 / 2) + 1; the sign is free
        ("1E+5", 2),  # exponent notation is one digit
        ("0", 2),
        ("1" * 38, 20),  # the 38-digit maximum
    ],
)
def test_numbers_cost_one_byte_per_two_significant_digits_plus_one(number, size):
    assert number_size(number) == size
    assert value_size({"N": number}) == size


def test_null_and_boolean_are_one_byte():
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1


def test_lists_and_maps_have_3_bytes_overhead_and_1_per_element():
    assert value_size({"L": []}) == value_size({"M": {}}) == 3  # empty: the overhead alone
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (2 + 1) + (2 + 1)
    assert value_size({"M": {"a": {"S": "xy"}}}) == 3 + (1 + 2 + 1)  # key + value + element byte
    nested = {"M": {"l": {"L": [{"BOOL": False}]}}}
    assert value_size(nested) == 3 + (1 + (3 + 1 + 1) + 1)


def test_sets_sum_their_elements():
    assert value_size({"SS": ["ab", "é"]}) == 4
    assert value_size({"NS": ["1", "100", "12345"]}) == 2 + 2 + 4
    assert value_size({"BS": [b"abc", b"d"]}) == 4


def test_item_is_names_plus_values_and_a_batch_item_prices_per_kb():
    head = {"pk": {"S": "q#1"}, "sk": {"S": "HEAD"}, "next": {"N": "42"}}
    assert item_size(head) == (2 + 3) + (2 + 4) + (4 + 2)
    assert item_size(None) == item_size({}) == 0
    with pytest.raises(ValueError, match="unknown DynamoDB type"):
        value_size({"X": 1})
    assert write_units(0) == write_units(1024) == 1
    assert write_units(1025) == 2
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2
    assert read_units(4097, consistent=False) == 1  # eventually consistent: half


def test_payloads_are_deterministic_and_json_events_stay_in_range():
    assert EVENTS.bodies(50, seed=1) == EVENTS.bodies(50, seed=1)
    assert EVENTS.bodies(5, seed=1) != EVENTS.bodies(5, seed=2)
    sizes = [len(json.dumps(b, separators=(",", ":")).encode()) for b, _ in EVENTS.bodies(500, seed=3)]
    assert min(sizes) >= EVENT_MIN_BYTES and max(sizes) <= EVENT_MAX_BYTES
    assert {ct for _, ct in EVENTS.bodies(20, seed=1)} == {"json"}
    assert all(len(b) == 200 for b, _ in RANDOM_200.bodies(20, seed=1))


def test_sqs_reference_prices_follow_its_request_rules():
    assert prices.sqs_per_million(200, 1) == pytest.approx(1.20)  # send + receive + delete
    assert prices.sqs_per_million(200, 100) == pytest.approx(0.12)  # capped at SQS's batch of 10
    assert prices.sqs_per_million(10 * 1024, 10) == pytest.approx(0.20)  # 100 KB: two 64 KB chunks


def test_provisioned_pays_per_unit_second_over_target_utilization():
    u = prices.Usage(wru=1.0, rru=0.0, apigw_requests=0.0, invocations=0.0, gb_seconds=0.0)
    on_demand = prices.on_demand_per_million(u)["dynamodb"]
    provisioned = prices.provisioned_per_million(u, 0.5)["dynamodb"]
    assert on_demand == pytest.approx(0.625)
    assert provisioned == pytest.approx(1e6 * 0.00065 / 3600 / 0.5)
