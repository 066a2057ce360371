"""The local gateway's throttle: API Gateway's token buckets, the account's and each route's, with the
limits read from the template's `$default` stage."""

from __future__ import annotations

import json
import threading

from sluice import errors
from sluice.local import gateway
from sluice.local.template import (
    ACCOUNT_THROTTLE,
    ThrottleLimits,
    route_throttles_from_template,
    stage_throttle_from_template,
)

SEND, LIST = "POST /v1/queues/{queue_name}/messages", "GET /v1/queues"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_starts_full_and_refuses_past_its_burst():
    bucket = gateway.TokenBucket(ThrottleLimits(rate=5, burst=3), Clock())
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_a_bucket_refills_at_its_rate_and_never_past_its_burst():
    clock = Clock()
    bucket = gateway.TokenBucket(ThrottleLimits(rate=4, burst=3), clock)
    while bucket.take():
        pass
    clock.now += 0.125  # half a token
    assert not bucket.take()
    clock.now += 0.125
    assert bucket.take() and not bucket.take()
    clock.now += 60
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_threads_taking_at_once_never_spend_more_than_the_burst():
    bucket = gateway.TokenBucket(ThrottleLimits(rate=5, burst=50), Clock())  # time stands still
    taken: list[bool] = []
    start = threading.Barrier(8)

    def take_many() -> None:
        start.wait()
        taken.extend(bucket.take() for _ in range(100))

    threads = [threading.Thread(target=take_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert taken.count(True) == 50


def test_each_route_has_its_own_bucket_of_the_stage_limits():
    throttle = gateway.StageThrottle(ThrottleLimits(rate=1, burst=2), [SEND, LIST], Clock())
    assert [throttle.refusing(SEND) for _ in range(3)] == [None, None, ThrottleLimits(rate=1, burst=2)]
    assert throttle.refusing(LIST) is None


def test_a_route_throttled_apart_draws_on_its_own_limits_instead_of_the_stages():
    apart = ThrottleLimits(rate=1, burst=3)
    throttle = gateway.StageThrottle(
        ThrottleLimits(rate=1, burst=1), [SEND, LIST], Clock(), apart={SEND: apart}
    )
    assert [throttle.refusing(SEND) for _ in range(4)] == [None, None, None, apart]
    assert [throttle.refusing(LIST) for _ in range(2)] == [None, ThrottleLimits(rate=1, burst=1)]


def test_route_settings_are_read_from_the_default_stage_a_limit_left_out_being_the_defaults():
    template = stage(ThrottlingRateLimit=100, ThrottlingBurstLimit=200)
    props = template["Resources"]["Stage"]["Properties"]
    props["RouteSettings"] = {
        SEND: {"ThrottlingRateLimit": 5000, "ThrottlingBurstLimit": 6000},
        LIST: {"ThrottlingRateLimit": 7},
        "GET /v1/queues/{queue_name}": {"DetailedMetricsEnabled": True},
    }
    assert route_throttles_from_template(template) == {
        SEND: ThrottleLimits(rate=5000.0, burst=6000),
        LIST: ThrottleLimits(rate=7.0, burst=200),
    }
    assert route_throttles_from_template(stage(ThrottlingRateLimit=100)) == {}


def test_the_account_bucket_is_shared_by_every_route_and_applies_without_a_stage_throttle():
    clock = Clock()
    throttle = gateway.StageThrottle(None, [SEND, LIST], clock)
    for _ in range(ACCOUNT_THROTTLE.burst // 2):
        assert throttle.refusing(SEND) is None and throttle.refusing(LIST) is None
    assert throttle.refusing(LIST) == ACCOUNT_THROTTLE
    clock.now += 1 / ACCOUNT_THROTTLE.rate
    assert throttle.refusing(SEND) is None


def test_a_throttled_request_gets_api_gateways_429_with_a_code():
    status, headers, data = gateway.throttled(ThrottleLimits(rate=5, burst=5))
    doc = json.loads(data)
    assert (status, headers["Content-Type"]) == (429, "application/json")
    assert doc["message"] == "Too Many Requests" and doc["success"] is False
    assert doc["errors"][0]["code"] == errors.GatewayThrottled.code == 10430


def stage(**settings: object) -> dict:
    props = {"StageName": "$default", "DefaultRouteSettings": settings}
    return {"Resources": {"Stage": {"Type": "AWS::ApiGatewayV2::Stage", "Properties": props}}}


def test_the_stage_throttle_is_read_from_the_default_stages_default_route_settings():
    assert stage_throttle_from_template(
        stage(ThrottlingRateLimit=1000, ThrottlingBurstLimit=2000)
    ) == ThrottleLimits(rate=1000.0, burst=2000)
    assert stage_throttle_from_template(stage(DetailedMetricsEnabled=True)) is None
    assert stage_throttle_from_template({"Resources": {}}) is None


def test_a_limit_the_stage_leaves_out_is_the_accounts():
    assert stage_throttle_from_template(stage(ThrottlingRateLimit=5)) == ThrottleLimits(
        rate=5.0, burst=ACCOUNT_THROTTLE.burst
    )
    assert stage_throttle_from_template(stage(ThrottlingBurstLimit=5)) == ThrottleLimits(
        rate=ACCOUNT_THROTTLE.rate, burst=5
    )
