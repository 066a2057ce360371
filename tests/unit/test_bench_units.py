"""DynamoDB item-size rules used by bench/units.py (examples from the DynamoDB developer guide)."""

from bench.units import item_size, value_size


def test_item_size_counts_names_and_values():
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert value_size({"B": b"\x00" * 10}) == 10
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert value_size({"N": "123"}) == 3  # 3 significant digits: ceil(3/2) + 1
    assert value_size({"N": "1700000000000"}) == 2  # trailing zeros are not significant: "17"
    assert value_size({"M": {"a": {"S": "xy"}}}) == 3 + 1 + 2 + 1
    assert item_size({"pk": {"S": "q#1"}, "sk": {"S": "HEAD"}, "next": {"N": "42"}}) == (2 + 3) + (2 + 4) + (
        4 + 2
    )
