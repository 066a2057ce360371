#!/usr/bin/env python3
"""CDK app: `python app.py` (or `cdk synth`) writes cdk.out/SluiceStack.template.json.

The construct id `SluiceStack` (the template's file name, which the local runtime reads, and what
`cdk deploy SluiceStack` selects) is the same for every stage; the CloudFormation stack *name* is
`sluice-<stage>`, so two stages deploy side by side in one account and region.

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

from stacks.config import SluiceConfig
from stacks.sluice_stack import SluiceStack

ROOT = Path(__file__).resolve().parent
STACK_NAME = "SluiceStack"


def stack_name(stage: str) -> str:
    """The CloudFormation stack name of a stage: `sluice-<stage>`."""
    return f"sluice-{stage}"


def build_app(
    context: dict[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, SluiceStack]:
    """The app with cdk-nag applied. Context precedence: CLI/CDK_CONTEXT_JSON > `context` > cdk.json."""
    defaults = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    app = cdk.App(context={**defaults, **(context or {})}, outdir=outdir)
    config = SluiceConfig.from_node(app.node)
    stack = SluiceStack(app, STACK_NAME, stack_name=stack_name(config.stage), config=config)
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


if __name__ == "__main__":
    # The CDK CLI sets CDK_OUTDIR; a plain `python app.py` writes to ./cdk.out like the CLI would.
    build_app(outdir=os.environ.get("CDK_OUTDIR") or str(ROOT / "cdk.out"))[0].synth()
