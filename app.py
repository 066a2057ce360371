#!/usr/bin/env python3
"""CDK app: `python app.py` (or `cdk synth`) writes cdk.out/SluiceStack.template.json.

The construct id `SluiceStack` (the template's file name, which the local runtime reads, and what
`cdk deploy SluiceStack` selects) is the same for every stage; the CloudFormation stack *name* is
`sluice-<stage>`, so two stages deploy side by side in one account and region.

With context `regions=home,other,...` the app holds one stack per region instead: construct id
`SluiceStack-<region>` (template `SluiceStack-<region>.template.json`), stack name
`sluice-<stage>-<region>`, region set and account left to deploy time; every other region's stack
depends on the home region's (it holds the global control table and the lease-key secret). Deploy them
all with `cdk deploy --all -c regions=...` (docs/deploy.md).

Context (`-c key=value` with the CDK CLI, or CDK_CONTEXT_JSON) configures the stack; see
stacks/config.py for keys and defaults. cdk.json's context is applied here too, so a plain
`python app.py` synthesizes exactly what the CLI does. No AWS credentials are needed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from sluice import constants as c
from stacks.config import SluiceConfig
from stacks.regions import Deployment
from stacks.sluice_stack import SluiceStack

ROOT = Path(__file__).resolve().parent
STACK_NAME = c.STACK_ID


def stack_name(stage: str, region: str | None = None) -> str:
    """The CloudFormation stack name: `sluice-<stage>`, or `sluice-<stage>-<region>` per region."""
    return f"sluice-{stage}" + (f"-{region}" if region else "")


def deploy_target() -> tuple[str | None, str | None]:
    """The account and region the CDK CLI deploys to (it sets CDK_DEFAULT_ACCOUNT/REGION from the
    caller's credentials): with them the retained resources' names are literal in the template, which
    `cdk deploy --import-existing-resources` needs to adopt them after a destroy (docs/deploy.md).
    Without credentials (plain `python app.py`, the local runtime, tests) both are None and the
    stacks stay environment-agnostic."""
    return os.environ.get("CDK_DEFAULT_ACCOUNT") or None, os.environ.get("CDK_DEFAULT_REGION") or None


def build_app(
    context: dict[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, SluiceStack]:
    """The app and its stack (with `regions`: the home region's). See `build_stacks`."""
    app, stacks = build_stacks(context, outdir)
    return app, next(iter(stacks.values()))


def build_stacks(
    context: dict[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, dict[str | None, SluiceStack]]:
    """The app with cdk-nag applied, and its stacks by region (home first; a single-region app's one
    stack under None). Context precedence: CLI/CDK_CONTEXT_JSON > `context` > cdk.json."""
    defaults = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    app = cdk.App(context={**defaults, **(context or {})}, outdir=outdir)
    config = SluiceConfig.from_node(app.node)
    account, cli_region = deploy_target()
    stacks: dict[str | None, SluiceStack] = {}
    regions = config.region_list
    if not regions:
        env = None
        if account and cli_region:
            config.check_bucket_name(cli_region)
            env = cdk.Environment(account=account, region=cli_region)
        stacks[None] = SluiceStack(
            app, STACK_NAME, stack_name=stack_name(config.stage), config=config, env=env
        )
    for region in regions:
        deployment = Deployment(tuple(regions), region, config.stage, config.shard_table_count, account)
        stack = SluiceStack(
            app,
            c.stack_id(region),
            stack_name=stack_name(config.stage, region),
            env=cdk.Environment(account=account, region=region),
            config=config,
            deployment=deployment,
        )
        if not deployment.is_home:
            stack.add_stack_dependency(stacks[deployment.home])
        stacks[region] = stack
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stacks


if __name__ == "__main__":
    # The CDK CLI sets CDK_OUTDIR; a plain `python app.py` writes to ./cdk.out like the CLI would.
    build_app(outdir=os.environ.get("CDK_OUTDIR") or str(ROOT / "cdk.out"))[0].synth()
