"""Where one regional stack of a multi-region deployment sits, and the names of every region's resources.

A multi-region deployment (`-c regions=home,other,...`) is one stack per region. Functions in one region
use resources of the others (the home region's control table, every region's shard tables, buckets
and shard-map parameters), so those resources have deterministic names (`constants.physical_name`) and
the ARNs here are built from names, region and the deploying account: no cross-region references.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Stack

from sluice import constants as c


@dataclass(frozen=True)
class Deployment:
    """The regions of the deployment (home first), the region of this stack, and what is named alike
    everywhere (stage, number of shard tables)."""

    regions: tuple[str, ...]
    region: str
    stage: str
    shard_table_count: int
    # The deploying account when the CDK CLI knows it (CDK_DEFAULT_ACCOUNT), so bucket names are literal
    # in the template (what CloudFormation needs to adopt a retained bucket); None: a deploy-time token.
    account: str | None = None

    @property
    def home(self) -> str:
        return self.regions[0]

    @property
    def is_home(self) -> bool:
        return self.region == self.home

    @property
    def others(self) -> tuple[str, ...]:
        """Every region but this stack's."""
        return tuple(r for r in self.regions if r != self.region)

    # -- names (the same function the runtime uses) ----------------------------------------------------
    @property
    def control_table_name(self) -> str:
        return c.physical_name(self.stage, c.LOGICAL_CONTROL_TABLE)

    @property
    def shard_table_names(self) -> list[str]:
        return [
            c.physical_name(self.stage, f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}")
            for i in range(self.shard_table_count)
        ]

    def bucket_name(self, region: str) -> str:
        """The segment bucket of `region` in the deploying account (a deploy-time token when synthesized
        without credentials)."""
        account = self.account or Aws.ACCOUNT_ID
        return c.physical_name(self.stage, c.LOGICAL_SEGMENT_BUCKET, account=account, region=region)

    @property
    def lease_key_secret_name(self) -> str:
        return c.physical_name(self.stage, c.LOGICAL_LEASE_KEY_SECRET)

    # -- ARNs --------------------------------------------------------------------------------------------
    def table_arn(self, stack: Stack, name: str, region: str) -> str:
        return stack.format_arn(service="dynamodb", resource="table", resource_name=name, region=region)

    def shard_table_arns(self, stack: Stack, region: str) -> list[str]:
        return [self.table_arn(stack, name, region) for name in self.shard_table_names]

    def bucket_arn(self, stack: Stack, region: str) -> str:
        return stack.format_arn(service="s3", resource=self.bucket_name(region), region="", account="")
