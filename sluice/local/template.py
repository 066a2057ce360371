"""The synthesized CloudFormation template, cached: shared by `make synth` and the local runtime.

`python app.py` takes ≈ 15 s (jsii + node), so the template is synthesized once and reused while a hash
of its inputs is unchanged: `stacks/`, `app.py`, `cdk.json`, `sluice/constants.py`, `sluice/events.py`
(the schedule's input is built from it), `pyproject.toml` and the context. The hash is written next to
the template (`cdk.out/.sluice-synth-hash`).
Default context synthesizes into `cdk.out/` (what `cdk deploy --app cdk.out` and cfn-lint use);
other contexts get their own folder under `.cache/synth/` so they do not evict each other.

Multi-region context (`regions=home,other,...`): one synthesis writes every region's template,
`SluiceStack-<region>.template.json`; `load_template(context, region=...)` reads one of them (default:
the home region's), and `region_templates(context)` all of them, so the local runtime can run one
region per template. Without `regions` the single `SluiceStack.template.json`, as before.

Pure standard library: importing this module never starts node. Usage:
    python -m sluice.local.template synth [--force] [-c key=value ...]   # prints the template paths
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.constants import FUNCTION_HANDLERS, STACK_ID, stack_id

STACK_NAME = STACK_ID
HASH_FILE = ".sluice-synth-hash"
HASHED_PATHS = ("stacks", "app.py", "cdk.json", "sluice/constants.py", "sluice/events.py", "pyproject.toml")


class TemplateUnavailable(RuntimeError):
    """The template could not be produced (no repo checkout, no node, or synth failed)."""


def repo_root() -> Path:
    """The checkout holding app.py: $SLUICE_REPO_ROOT, else this file's repo, else the cwd."""
    candidates = [os.environ.get("SLUICE_REPO_ROOT"), Path(__file__).resolve().parents[2], Path.cwd()]
    for cand in candidates:
        if cand and (Path(cand) / "app.py").is_file() and (Path(cand) / "stacks").is_dir():
            return Path(cand)
    raise TemplateUnavailable(
        "cannot find the Sluice CDK app (app.py + stacks/): run from a repository checkout or set "
        "SLUICE_REPO_ROOT to one"
    )


def input_hash(root: Path, context: dict[str, Any] | None = None) -> str:
    digest = hashlib.sha256()
    for rel in HASHED_PATHS:
        path = root / rel
        files = (
            sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts) if path.is_dir() else [path]
        )
        for f in files:
            if f.is_file():
                digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    digest.update(json.dumps(context or {}, sort_keys=True).encode())
    return digest.hexdigest()


def outdir_for(root: Path, context: dict[str, Any] | None = None) -> Path:
    if not context:
        return root / "cdk.out"
    key = hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()[:12]
    return root / ".cache" / "synth" / key


def regions_of(context: dict[str, Any] | None) -> list[str]:
    """The regions a context deploys to, home first (empty: a single-region stack)."""
    return [r.strip() for r in str((context or {}).get("regions", "")).split(",") if r.strip()]


def template_names(context: dict[str, Any] | None = None) -> list[str]:
    """The template files one synthesis with `context` writes: one per region, or `SluiceStack`'s."""
    regions: list[str | None] = [*regions_of(context)] or [None]
    return [f"{stack_id(r)}.template.json" for r in regions]


def template_name(context: dict[str, Any] | None = None, region: str | None = None) -> str:
    """The template file of `region` (default: the home region's, or the single stack's)."""
    regions = regions_of(context)
    if region is None:
        return template_names(context)[0]
    if region not in regions:
        raise TemplateUnavailable(f"region {region!r} is not one of the context's regions {regions}")
    return f"{stack_id(region)}.template.json"


def is_fresh(outdir: Path, digest: str, context: dict[str, Any] | None = None) -> bool:
    hash_file = outdir / HASH_FILE
    return (
        hash_file.is_file()
        and hash_file.read_text().strip() == digest
        and all((outdir / name).is_file() for name in template_names(context))
    )


def synth(
    context: dict[str, Any] | None = None,
    *,
    force: bool = False,
    root: Path | None = None,
    region: str | None = None,
) -> Path:
    """Synthesize unless the cached templates are current; return the path of `region`'s template
    (default: the home region's, or the single stack's)."""
    root = root or repo_root()
    outdir = outdir_for(root, context)
    digest = input_hash(root, context)
    template = outdir / template_name(context, region)
    if not force and is_fresh(outdir, digest, context):
        return template
    if shutil.which("node") is None:
        raise TemplateUnavailable(
            "synthesizing the Sluice template needs Node.js (the CDK runs on jsii/node); install node "
            f"or provide a current {template}"
        )
    tmp = outdir.with_name(f"{outdir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    env = {
        # Without the CDK CLI's deploy target the template stays environment-agnostic, as the local
        # runtime and the IAM call audit resolve it (app.deploy_target).
        **{k: v for k, v in os.environ.items() if k not in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")},
        "CDK_OUTDIR": str(tmp),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": os.environ.get(
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20"
        ),
    }
    if context:
        env["CDK_CONTEXT_JSON"] = json.dumps(context)
    proc = subprocess.run(
        [sys.executable, "app.py"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not all((tmp / name).is_file() for name in template_names(context)):
        shutil.rmtree(tmp, ignore_errors=True)
        raise TemplateUnavailable(f"`python app.py` failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    (tmp / HASH_FILE).write_text(digest + "\n")
    shutil.rmtree(outdir, ignore_errors=True)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(outdir)
    return template


def load_template(context: dict[str, Any] | None = None, region: str | None = None) -> dict[str, Any]:
    """The cached `SluiceStack.template.json` (with `regions` in the context: `region`'s
    `SluiceStack-<region>.template.json`, default the home region's), synthesized first if missing or
    stale."""
    return json.loads(synth(context, region=region).read_text())


def region_templates(context: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every region's template of a multi-region context, home first (one synthesis for all)."""
    regions = regions_of(context)
    if not regions:
        raise TemplateUnavailable("the context names no regions (context key `regions`)")
    return {region: load_template(context, region) for region in regions}


def functions_from_template(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Function name (`constants.FUNCTION_HANDLERS` key) -> Properties of its `AWS::Lambda::Function`,
    found by handler: logical ids carry CDK's hash suffixes, handlers do not."""
    by_handler = {handler: name for name, handler in FUNCTION_HANDLERS.items()}
    found: dict[str, dict[str, Any]] = {}
    for res in template.get("Resources", {}).values():
        props = res.get("Properties", {})
        if res.get("Type") == "AWS::Lambda::Function" and props.get("Handler") in by_handler:
            found[by_handler[props["Handler"]]] = props
    return found


def max_event_ages_from_template(template: dict[str, Any]) -> dict[tuple[str, str | None], float]:
    """(function, alias or None for $LATEST) -> the MaximumEventAgeInSeconds of its
    `AWS::Lambda::EventInvokeConfig`: how long an asynchronous invocation of it may wait to run."""
    resources = template.get("Resources", {})
    by_handler = {handler: name for name, handler in FUNCTION_HANDLERS.items()}
    ages: dict[tuple[str, str | None], float] = {}
    for res in resources.values():
        props = res.get("Properties", {})
        if res.get("Type") != "AWS::Lambda::EventInvokeConfig" or "MaximumEventAgeInSeconds" not in props:
            continue
        handler = resources.get(_ref(props["FunctionName"]) or "", {}).get("Properties", {}).get("Handler")
        if handler in by_handler:
            qualifier = props.get("Qualifier", "$LATEST")  # a name, or the alias's ARN split at ":"
            if not isinstance(qualifier, str):
                qualifier = resources.get(_ref(qualifier) or "", {}).get("Properties", {}).get("Name")
            if not isinstance(qualifier, str):
                raise TemplateUnavailable(f"an EventInvokeConfig of {handler} names no version or alias")
            alias = None if qualifier == "$LATEST" else qualifier
            ages[(by_handler[handler], alias)] = float(props["MaximumEventAgeInSeconds"])
    return ages


@dataclass(frozen=True)
class ApiTarget:
    """What one API route invokes: the function (a `FUNCTION_HANDLERS` key) and the alias it goes
    through (None: the unqualified function, i.e. $LATEST), and whether that function has SnapStart."""

    function: str
    alias: str | None
    snap_start: bool


def _ref(value: Any) -> str | None:
    """The logical id a `Ref` or `Fn::GetAtt` names, or the first one found inside another intrinsic
    (`Fn::Join`, `Fn::Select` of an `Fn::Split`, ...)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
        value = list(value.values())
    if isinstance(value, list):
        return next((f for f in map(_ref, value) if f), None)
    return None


def api_targets_from_template(template: dict[str, Any]) -> dict[str, ApiTarget]:
    """Route key (`"GET /v1/queues"`) -> what the HTTP API invokes for it, followed through the
    template as API Gateway does: route -> integration -> alias (or function) -> function -> handler."""
    resources = template.get("Resources", {})
    by_handler = {handler: name for name, handler in FUNCTION_HANDLERS.items()}
    targets: dict[str, ApiTarget] = {}
    for res in resources.values():
        if res.get("Type") != "AWS::ApiGatewayV2::Route":
            continue
        props = res["Properties"]
        integration = resources.get(_ref(props.get("Target")) or "", {})
        invoked_id = _ref(integration.get("Properties", {}).get("IntegrationUri")) or ""
        invoked = resources.get(invoked_id, {})
        alias = None
        if invoked.get("Type") == "AWS::Lambda::Alias":
            alias = invoked["Properties"]["Name"]
            invoked = resources.get(_ref(invoked["Properties"]["FunctionName"]) or "", {})
        fn = invoked.get("Properties", {})
        if invoked.get("Type") != "AWS::Lambda::Function" or fn.get("Handler") not in by_handler:
            raise TemplateUnavailable(f"route {props.get('RouteKey')!r} invokes no Sluice function")
        snap_start = fn.get("SnapStart", {}).get("ApplyOn") == "PublishedVersions"
        targets[props["RouteKey"]] = ApiTarget(by_handler[fn["Handler"]], alias, snap_start)
    return targets


@dataclass(frozen=True)
class ThrottleLimits:
    """An API Gateway throttle: a token bucket of `burst` requests, refilled at `rate` a second."""

    rate: float
    burst: int


# API Gateway's quota for every API of an account in one Region; a stage's own throttle lies within it.
ACCOUNT_THROTTLE = ThrottleLimits(rate=10_000.0, burst=5_000)


def _default_stage(template: dict[str, Any]) -> dict[str, Any]:
    """The `$default` stage's properties ({} when the template has none)."""
    for res in template.get("Resources", {}).values():
        props = res.get("Properties", {})
        if res.get("Type") == "AWS::ApiGatewayV2::Stage" and props.get("StageName") == "$default":
            return dict(props)
    return {}


def _throttle(settings: dict[str, Any], default: ThrottleLimits) -> ThrottleLimits | None:
    """The throttle a route settings block sets (a limit it leaves out is `default`'s), or None."""
    if "ThrottlingRateLimit" not in settings and "ThrottlingBurstLimit" not in settings:
        return None
    return ThrottleLimits(
        rate=float(settings.get("ThrottlingRateLimit", default.rate)),
        burst=int(settings.get("ThrottlingBurstLimit", default.burst)),
    )


def stage_throttle_from_template(template: dict[str, Any]) -> ThrottleLimits | None:
    """The `$default` stage's `DefaultRouteSettings` throttle, or None when it sets none (the account's
    quota still applies). A limit it leaves out is the account's."""
    return _throttle(_default_stage(template).get("DefaultRouteSettings", {}), ACCOUNT_THROTTLE)


def route_throttles_from_template(template: dict[str, Any]) -> dict[str, ThrottleLimits]:
    """The `$default` stage's `RouteSettings` throttles, by route key: routes throttled apart from its
    default (a limit a route leaves out is the default route settings', else the account's)."""
    default = stage_throttle_from_template(template) or ACCOUNT_THROTTLE
    routes = _default_stage(template).get("RouteSettings", {})
    found = {key: _throttle(settings, default) for key, settings in routes.items()}
    return {key: limits for key, limits in found.items() if limits is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.local.template")
    sub = parser.add_subparsers(dest="command", required=True)
    p_synth = sub.add_parser("synth", help="synthesize into cdk.out unless inputs are unchanged")
    p_synth.add_argument("--force", action="store_true")
    p_synth.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    context = dict(item.split("=", 1) for item in args.context)
    root = repo_root()
    fresh = not args.force and is_fresh(outdir_for(root, context), input_hash(root, context), context)
    started = time.monotonic()
    try:
        path = synth(context, force=args.force, root=root)
    except TemplateUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    state = "up to date" if fresh else f"synthesized in {time.monotonic() - started:.1f} s"
    for name in template_names(context):
        print(f"{(path.parent / name).relative_to(root)} ({state})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
