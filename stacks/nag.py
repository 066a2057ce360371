"""cdk-nag suppressions that name the findings they cover.

Suppressions must be `NagPackSuppression` structs: given as plain dicts, cdk-nag (2.38, through jsii)
drops `applies_to` and the suppression covers every finding of the rule on the resource, so a new
wildcard grant would pass unnoticed (tests/infra/test_nag.py checks this).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from cdk_nag import NagPackSuppression, RegexAppliesTo


def finding(stack: Stack, resource: str) -> str:
    """cdk-nag's IAM5 finding for a wildcard resource: `Resource::` and the resource as cdk-nag writes it,
    each token in angle brackets (`<SegmentBucket.Arn>`, `<AWS::Partition>`)."""
    return "Resource::" + _as_nag_writes(stack.resolve(resource))


def _as_nag_writes(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Fn::Join":
            sep, parts = arg
            return sep.join(_as_nag_writes(part) for part in parts)
    raise ValueError(f"no cdk-nag rendering for {value!r}")


def iam5(reason: str, *findings: str) -> NagPackSuppression:
    """An AwsSolutions-IAM5 suppression for these findings only (`/.../`: a regex, else exact)."""
    return NagPackSuppression(
        id="AwsSolutions-IAM5",
        reason=reason,
        applies_to=[RegexAppliesTo(regex=f) if f.startswith("/") else f for f in findings],
    )
