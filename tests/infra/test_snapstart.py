"""SnapStart for the functions behind the HTTP API: published versions, an alias the API invokes, and
a template the local runtime reads back the same way (`sluice.local.template.api_targets_from_template`)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c
from sluice.local.template import api_targets_from_template
from tests.infra.helpers import function_ids, of_type, refs

pytestmark = pytest.mark.infra


def test_api_functions_snapshot_their_published_versions(resources: dict[str, Any]) -> None:
    assert {c.FN_BROKER, c.FN_CONSUMER} == c.API_FUNCTIONS
    for name, lid in function_ids(resources).items():
        props = resources[lid]["Properties"]
        if name in c.API_FUNCTIONS:
            assert props["SnapStart"] == {"ApplyOn": "PublishedVersions"}, name
            assert props["Runtime"] in {"python3.12", "python3.13"}, "SnapStart for Python needs 3.12+"
        else:  # invoked by name on $LATEST (schedule, coordinator): a snapshot would never be used
            assert "SnapStart" not in props, name


def test_each_api_function_has_one_alias_on_its_current_version(resources: dict[str, Any]) -> None:
    fn_ids = function_ids(resources)
    aliases = of_type(resources, "AWS::Lambda::Alias")
    versions = of_type(resources, "AWS::Lambda::Version")
    by_function = {next(iter(refs(a["Properties"]["FunctionName"]))): a for a in aliases.values()}
    assert set(by_function) == {fn_ids[name] for name in c.API_FUNCTIONS}
    for fn_id, alias in by_function.items():
        assert alias["Properties"]["Name"] == c.API_ALIAS
        (version_id,) = refs(alias["Properties"]["FunctionVersion"])
        assert refs(versions[version_id]["Properties"]["FunctionName"]) == {fn_id}


def test_api_may_invoke_only_the_aliases(resources: dict[str, Any]) -> None:
    aliases = set(of_type(resources, "AWS::Lambda::Alias"))
    api_permissions = [
        p["Properties"]
        for p in of_type(resources, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(api_permissions) == len(c.API_FUNCTIONS)
    assert {next(iter(refs(p["FunctionName"]))) for p in api_permissions} == aliases


def test_the_local_runtime_resolves_every_route_through_the_alias(cfn: dict[str, Any]) -> None:
    targets = api_targets_from_template(cfn)
    assert set(targets) == {route.route_key for route in c.ROUTES}
    for route in c.ROUTES:
        target = targets[route.route_key]
        assert (target.function, target.alias, target.snap_start) == (route.function, c.API_ALIAS, True)


def _parameters(value: Any, parameters: set[str]) -> set[str]:
    """The template parameters (resolved at deploy time, e.g. the Powertools layer's SSM parameter) a value
    references."""
    return refs(value) & parameters


def test_each_published_version_changes_with_every_deploy_time_value_its_function_loads(
    cfn: dict[str, Any],
) -> None:
    """The layer ARN comes from an SSM parameter resolved at deploy time: with `powertools_version=latest`
    it changes while the template does not, so the version's logical id (a hash of the template) stays.
    The version must name the parameter itself (its description), so a new value replaces it: a new
    version is published and snapshotted, and the alias moves onto the new layer."""
    resources, parameters = cfn["Resources"], set(cfn.get("Parameters", {}))
    versions = of_type(resources, "AWS::Lambda::Version")
    fn_ids = function_ids(resources)
    for name in c.API_FUNCTIONS:
        loaded = _parameters(resources[fn_ids[name]]["Properties"], parameters)
        assert loaded, "the layer is resolved from its SSM parameter at deploy time"
        (version,) = (v for v in versions.values() if refs(v["Properties"]["FunctionName"]) == {fn_ids[name]})
        assert _parameters(version["Properties"], parameters) == loaded, name
