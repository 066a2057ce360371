"""Every route in constants.ROUTES reaches the integration of the function that serves it."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c
from sluice.local.template import ThrottleLimits, route_throttles_from_template, stage_throttle_from_template
from tests.infra.helpers import function_ids, of_type, refs

pytestmark = pytest.mark.infra


def test_every_route_maps_to_its_functions_integration(resources: dict[str, Any]) -> None:
    fn_ids = function_ids(resources)
    integrations = of_type(resources, "AWS::ApiGatewayV2::Integration")
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in of_type(resources, "AWS::ApiGatewayV2::Route").values()
    }
    for route in c.ROUTES:
        key = f"{route.method} {route.path}"
        assert key in routes, f"route {key} is not defined"
        (integration_id,) = refs(routes[key]["Target"])
        integration = integrations[integration_id]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert integration["PayloadFormatVersion"] == "2.0"
        (alias_id,) = refs(integration["IntegrationUri"])
        alias = resources[alias_id]
        assert alias["Type"] == "AWS::Lambda::Alias", f"{key} must invoke an alias (SnapStart), not $LATEST"
        assert refs(alias["Properties"]["FunctionName"]) == {fn_ids[route.function]}, key


def test_no_route_outside_constants(resources: dict[str, Any]) -> None:
    defined = {r["Properties"]["RouteKey"] for r in of_type(resources, "AWS::ApiGatewayV2::Route").values()}
    assert defined == {f"{r.method} {r.path}" for r in c.ROUTES}


def _api_alone(route_throttles: dict[str, tuple[float, int]] | None = None) -> tuple[Any, Any]:
    """An `HttpApi` in a stack of its own, over stand-in functions: (stack, api)."""
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_

    from stacks.api import HttpApi

    stack = cdk.Stack(cdk.App())
    fns = {
        name: lambda_.Function(
            stack,
            name,
            runtime=lambda_.Runtime.PYTHON_3_12,
            handler=handler,
            code=lambda_.Code.from_inline("def lambda_handler(e, c): pass"),
        )
        for name, handler in c.FUNCTION_HANDLERS.items()
    }
    api = HttpApi(
        stack,
        "Http",
        stage="t",
        functions=fns,
        throttle_rate=1,
        throttle_burst=1,
        log_retention_days=1,
        route_throttles=route_throttles,
    )
    return stack, api


def test_greedy_and_appended_routes_are_generated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Routes appended to ROUTES later (greedy paths included) need no stack change."""
    extra = (
        c.Route("POST", "/v1/appended/{rest+}", c.FN_BROKER, (c.WRITE,)),
        c.Route("GET", "/v1/appended/{rest+}", c.FN_CONSUMER, (c.READ,)),
    )
    monkeypatch.setattr(c, "ROUTES", c.ROUTES + extra)
    _, api = _api_alone()
    assert ("POST", "/v1/appended/{rest+}") in api.routes and ("GET", "/v1/appended/{rest+}") in api.routes


def test_default_stage_throttles_and_logs_access(resources: dict[str, Any], stack: Any) -> None:
    (stage,) = of_type(resources, "AWS::ApiGatewayV2::Stage").values()
    props = stage["Properties"]
    assert props["StageName"] == "$default" and props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"]["ThrottlingRateLimit"] == stack.config.api_throttle_rate
    assert props["DefaultRouteSettings"]["ThrottlingBurstLimit"] == stack.config.api_throttle_burst
    (log_group_id,) = refs(props["AccessLogSettings"]["DestinationArn"])
    assert resources[log_group_id]["Type"] == "AWS::Logs::LogGroup"
    assert "$context.requestId" in props["AccessLogSettings"]["Format"]


def test_the_local_gateway_reads_the_stage_throttle_the_stack_sets(
    resources: dict[str, Any], stack: Any
) -> None:
    config = stack.config
    assert stage_throttle_from_template({"Resources": resources}) == ThrottleLimits(
        rate=config.api_throttle_rate, burst=config.api_throttle_burst
    )


def test_routes_throttled_apart_are_the_stages_route_settings_and_the_local_gateway_reads_them() -> None:
    """`-c api_route_throttles`: the stage's `RouteSettings`, after the routes it names (API Gateway
    refuses a stage naming a route it does not have yet); the default stage's template has none."""
    from aws_cdk.assertions import Template

    apart = {"POST /": (5000.0, 6000), "POST /v1/queues/{queue_name}/messages/pull": (3000.0, 3000)}
    stack, _ = _api_alone(apart)
    resources = Template.from_stack(stack).to_json()["Resources"]
    (stage,) = of_type(resources, "AWS::ApiGatewayV2::Stage").values()
    assert stage["Properties"]["RouteSettings"] == {
        key: {"ThrottlingRateLimit": rate, "ThrottlingBurstLimit": burst}
        for key, (rate, burst) in apart.items()
    }
    route_ids = {
        r["Properties"]["RouteKey"]: rid for rid, r in of_type(resources, "AWS::ApiGatewayV2::Route").items()
    }
    assert {route_ids[key] for key in apart} <= set(stage["DependsOn"])
    assert route_throttles_from_template({"Resources": resources}) == {
        key: ThrottleLimits(rate=rate, burst=burst) for key, (rate, burst) in apart.items()
    }


def test_the_default_stage_throttles_no_route_apart(resources: dict[str, Any]) -> None:
    assert route_throttles_from_template({"Resources": resources}) == {}


def test_api_invoke_permissions_cover_only_this_api(resources: dict[str, Any]) -> None:
    (api_id,) = of_type(resources, "AWS::ApiGatewayV2::Api")
    for perm in of_type(resources, "AWS::Lambda::Permission").values():
        props = perm["Properties"]
        if props["Principal"] == "apigateway.amazonaws.com":
            assert api_id in refs(props["SourceArn"])
