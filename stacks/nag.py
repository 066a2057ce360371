"""cdk-nag suppressions that name the findings they cover.

Suppressions must be `NagPackSuppression` structs: given as plain dicts, cdk-nag (2.38, through jsii)
drops `applies_to` and the suppression covers every finding of the rule on the resource, so a new
wildcard grant would pass unnoticed (tests/infra/test_nag.py checks this).
"""

from __future__ import annotations

from cdk_nag import NagPackSuppression, RegexAppliesTo

# An ARN's partition in a finding: a token in an environment-agnostic stack, literal in a regional one.
PARTITION = r"(<AWS::Partition>|aws[a-z-]*)"
# The segment bucket of this stack, by its logical id (`<SegmentBucket.Arn>/...*`).
OWN_BUCKET_OBJECTS = r"/^Resource::<.*SegmentBucket.*\.Arn>\/.*\*$/g"


def iam5(reason: str, *findings: str) -> NagPackSuppression:
    """An AwsSolutions-IAM5 suppression for these findings only (`/.../`: a regex, else exact)."""
    return NagPackSuppression(
        id="AwsSolutions-IAM5",
        reason=reason,
        applies_to=[RegexAppliesTo(regex=f) if f.startswith("/") else f for f in findings],
    )
