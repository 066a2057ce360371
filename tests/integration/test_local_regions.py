"""The pieces of `sluice local --regions` on in-process moto: the control table's global-table
replication, the outage switch, the distance-and-outage hook and the call log it is counted with."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterator

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from sluice import constants as c
from sluice import errors
from sluice.adapters import aws as adapters
from sluice.local import callaudit, interregion
from sluice.local.interregion import OutageSwitch
from sluice.local.regions import OutageRoutes, parse_regions
from sluice.local.replication import GlobalTableReplicator
from tests.regions import create_key_table

HOME, AWAY = "us-east-1", "eu-west-1"
LAG = 0.3


@functools.cache
def _client(region: str):
    """A client per region outside `aws.client`'s cache, one attempt: what a hook does shows at once."""
    import botocore.session

    return botocore.session.get_session().create_client(
        "dynamodb", region_name=region, config=Config(retries={"max_attempts": 1, "mode": "standard"})
    )


@pytest.fixture
def tables(aws: None) -> Iterator[str]:
    """A table of the control table's shape, in both regions (a unique name: the session's moto)."""
    name = f"control-{uuid.uuid4().hex[:8]}"
    for region in (HOME, AWAY):
        create_key_table(_client(region), name)
    yield name
    for region in (HOME, AWAY):
        _client(region).delete_table(TableName=name)


@pytest.fixture
def switch(tmp_path) -> OutageSwitch:
    return OutageSwitch(tmp_path / "down.json")


@pytest.fixture
def replicator(tables: str, switch: OutageSwitch) -> Iterator[GlobalTableReplicator]:
    rep = GlobalTableReplicator([tables], [HOME, AWAY], LAG, switch.is_down)
    rep.start()
    yield rep
    rep.stop()


def _get(region: str, table: str, pk: str = "k") -> dict | None:
    return _client(region).get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": "s"}}).get("Item")


def _put(region: str, table: str, value: str, pk: str = "k") -> None:
    item = {"pk": {"S": pk}, "sk": {"S": "s"}, "v": {"S": value}}
    _client(region).put_item(TableName=table, Item=item)


def test_a_write_reaches_the_other_region_after_the_lag_and_only_then(tables, replicator):
    _put(HOME, tables, "one")
    assert _get(AWAY, tables) is None  # not before the lag
    assert replicator.settle(5)
    assert _get(AWAY, tables)["v"] == {"S": "one"}
    # Updates and deletes from the other side travel back; each write is copied once (no ping-pong).
    _client(AWAY).update_item(
        TableName=tables,
        Key={"pk": {"S": "k"}, "sk": {"S": "s"}},
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"S": "two"}},
    )
    assert replicator.settle(5)
    assert _get(HOME, tables)["v"] == {"S": "two"}
    _client(HOME).delete_item(TableName=tables, Key={"pk": {"S": "k"}, "sk": {"S": "s"}})
    assert replicator.settle(5)
    assert _get(AWAY, tables) is None
    time.sleep(2 * LAG)
    assert replicator.copied == 3 and replicator.superseded == 0


def test_last_writer_wins_when_both_regions_write_one_item(tables, replicator):
    _put(HOME, tables, "earlier")
    _put(AWAY, tables, "later")  # before the first write reached it: a conflict
    assert replicator.settle(5)
    assert _get(HOME, tables)["v"] == _get(AWAY, tables)["v"] == {"S": "later"}
    assert replicator.superseded == 1  # the earlier write's copy lost in the region that wrote later


def test_a_cancelled_transaction_replicates_nothing_a_committed_one_everything(tables, replicator):
    put = {"Put": {"TableName": tables, "Item": {"pk": {"S": "t1"}, "sk": {"S": "s"}}}}
    fails = {
        "ConditionCheck": {
            "TableName": tables,
            "Key": {"pk": {"S": "absent"}, "sk": {"S": "s"}},
            "ConditionExpression": "attribute_exists(pk)",
        }
    }
    with pytest.raises(ClientError):
        _client(HOME).transact_write_items(TransactItems=[put, fails])
    second = {"Put": {"TableName": tables, "Item": {"pk": {"S": "t2"}, "sk": {"S": "s"}}}}
    _client(HOME).transact_write_items(TransactItems=[put, second])
    assert replicator.settle(5)
    assert _get(AWAY, tables, "t1") is not None and _get(AWAY, tables, "t2") is not None
    assert replicator.copied == 2


def test_a_copy_to_a_region_that_is_down_waits_until_it_is_back(tables, replicator, switch):
    switch.set(AWAY, True)
    _put(HOME, tables, "held")
    assert not replicator.settle(3 * LAG)
    assert _get(AWAY, tables) is None  # read around the switch: moto itself is up
    switch.set(AWAY, False)
    assert replicator.settle(5)
    assert _get(AWAY, tables)["v"] == {"S": "held"}


def test_the_switch_is_shared_through_its_file(tmp_path):
    writer, reader = OutageSwitch(tmp_path / "s.json"), OutageSwitch(tmp_path / "s.json")
    assert reader.down() == frozenset()
    writer.set(AWAY, True)
    assert reader.is_down(AWAY) and not reader.is_down(HOME)
    writer.set(HOME, True)
    writer.set(AWAY, False)
    assert reader.down() == {HOME}


@pytest.mark.usefixtures("aws")
def test_calls_to_another_region_wait_the_delay_and_fail_when_it_is_down(switch):
    import botocore.session

    session = botocore.session.get_session()
    one_attempt = Config(retries={"max_attempts": 1, "mode": "standard"})
    home, away = (session.create_client("dynamodb", region_name=r, config=one_attempt) for r in (HOME, AWAY))
    attach = interregion.hook(HOME, 0.2, switch)
    attach(home)
    attach(away)
    started = time.monotonic()
    home.list_tables()
    near = time.monotonic() - started
    started = time.monotonic()
    away.list_tables()
    far = time.monotonic() - started
    assert far >= 0.2 and near < 0.2, (near, far)
    switch.set(AWAY, True)
    with pytest.raises(EndpointConnectionError):
        away.list_tables()
    home.list_tables()  # the caller's own region is up
    with pytest.raises(errors.DependencyUnavailable), adapters.translated("the away region's table"):
        away.list_tables()


@pytest.mark.usefixtures("aws")
def test_the_call_log_names_the_callers_region_and_the_calls(tmp_path, monkeypatch):
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv(c.ENV_CALL_LOG_FILE, str(log))
    monkeypatch.setenv(c.ENV_IAM_AUDIT_FILE, str(tmp_path / "audit.jsonl"))  # not the session's audit
    monkeypatch.setenv(c.ENV_REGION, HOME)
    monkeypatch.setenv(c.ENV_REGIONS, f"{HOME},{AWAY}")
    assert callaudit.install_from_env()
    with callaudit.attributed(c.FN_BROKER):
        adapters.client("dynamodb", None, HOME).list_tables()
        adapters.client("dynamodb", None, AWAY).list_tables()
        adapters.client("dynamodb", None, AWAY).list_tables()
    calls = [
        (r["function"], r["region"], r["caller_region"], r["operation"]) for r in callaudit.load_call_log(log)
    ]
    assert calls == [
        (c.FN_BROKER, HOME, HOME, "ListTables"),
        (c.FN_BROKER, AWAY, HOME, "ListTables"),
        (c.FN_BROKER, AWAY, HOME, "ListTables"),  # every call, not each distinct one once
    ]
    # The IAM audit records each distinct call once, judged by the role of the caller's region.
    audited = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(r["region"], r["caller_region"], r["regions"]) for r in audited] == [
        (HOME, HOME, f"{HOME},{AWAY}"),
        (AWAY, HOME, f"{HOME},{AWAY}"),
    ]


def test_region_lists_are_checked():
    assert parse_regions("us-east-1, eu-west-1") == [HOME, AWAY]
    for bad in ("us-east-1", "us-east-1,us-east-1", "us-east-1,Europe", "us-east-1,eu-west-1;x"):
        with pytest.raises(ValueError):
            parse_regions(bad)


def test_the_outage_routes_take_the_admin_token(switch):
    routes = OutageRoutes([HOME, AWAY], switch, "secret", "http://moto")
    bearer = {"Authorization": "Bearer secret"}
    assert routes("GET", "/v1/queues", bearer) is None  # not theirs: the API's
    assert routes("POST", f"/_local/regions/{AWAY}/down", {})[0] == 401
    assert routes("POST", f"/_local/regions/{AWAY}/down", {"Authorization": "Bearer nope"})[0] == 403
    assert routes("GET", f"/_local/regions/{AWAY}/down", bearer)[0] == 405
    assert routes("POST", "/_local/regions/mars-1/down", bearer)[0] == 404
    assert not switch.down()
    assert routes("POST", f"/_local/regions/{AWAY}/down", bearer)[0] == 200
    assert switch.down() == {AWAY}
    status, _, body = routes("GET", "/_local/regions", bearer)
    assert status == 200 and b'"down": true' in body and b"http://moto" in body
