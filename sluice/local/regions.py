"""`sluice local --regions us-east-1,eu-west-1`: one local region per name on one embedded moto.

moto keeps regions apart by the region a request is signed for, so one server holds every region's
tables, bucket, parameters and secret. Each region gets a `LocalRuntime` of its own: its own port, its
own containers (env `SLUICE_REGION`, `AWS_REGION`/`AWS_DEFAULT_REGION` = the region, `SLUICE_REGIONS`
home first, `SLUICE_SEGMENT_BUCKETS`), its template's resources provisioned in its region and its
template's schedules. What a deployment spread over regions has besides:

- the control table is a global table: `sluice.local.replication` copies every write to the other
  regions' tables after `--replication-lag-ms`, last writer wins;
- regions are far apart: a call from one region's container to another region waits
  `--inter-region-delay-ms` (`sluice.local.interregion`);
- a region can fail: `POST /_local/regions/<region>/down` (and `/up`) on any region's port, with the
  admin token, makes that region unreachable: its HTTP API answers 503, its schedules stop firing, and
  every AWS call to it, from any region's containers, fails as a connection error. `GET
  /_local/regions` lists the regions, which are down, and the moto endpoint they share. The state is a
  file every process reads.

The lease-signing secret has the same value in every region, as a secret replicated to every region
(`ReplicaRegions`) has.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moto.server import ThreadedMotoServer

from lambdas.common.errors import envelope, status_of
from sluice import constants as c
from sluice import errors
from sluice.adapters import aws
from sluice.local import moto_patches
from sluice.local.interregion import OutageSwitch
from sluice.local.provision import local_name, provision
from sluice.local.replication import GlobalTableReplicator
from sluice.local.runtime import LOCAL_AWS_ENV, LocalRuntime, free_port
from sluice.local.template import load_template
from sluice.settings import Settings

log = logging.getLogger(__name__)
# A region name as AWS spells them (us-east-1, ap-southeast-2, us-gov-west-1, eu-central-2).
REGION_NAME = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
DEFAULT_INTER_REGION_DELAY_MS = 70.0  # about a us-east-1 <-> eu-west-1 round trip
DEFAULT_REPLICATION_LAG_MS = 1000.0
READY_SETTLE_SECONDS = 30.0  # the admin token reaches every region's replica before the ready line
OUTAGE_PATH = re.compile(r"^/_local/regions/(?P<region>[^/]+)/(?P<state>down|up)$")
REGIONS_PATH = "/_local/regions"


def parse_regions(text: str) -> list[str]:
    """`us-east-1,eu-west-1` -> the regions, home first; ValueError for a malformed or repeated name."""
    regions = [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in regions if not REGION_NAME.match(r)]
    if bad:
        raise ValueError(f"not a region name: {', '.join(bad)}")
    if len(set(regions)) != len(regions):
        raise ValueError(f"a region is listed twice: {text}")
    if len(regions) < 2:
        raise ValueError("--regions takes two or more regions (one region: leave --regions out)")
    return regions


def region_template(region: str, regions: list[str], context: dict[str, str] | None = None) -> dict[str, Any]:
    """The template `region`'s stack is deployed from (`-c regions=...`: one stack per region, the home
    one holding the global control table and the replicated lease-key secret), with `context` besides."""
    return load_template({**(context or {}), "regions": ",".join(regions)}, region=region)


def provision_regions(
    endpoint_url: str, stage: str, templates: dict[str, dict[str, Any]]
) -> dict[str, Settings]:
    """Every region's resources on the one moto server, and each region's `Settings` (home first)."""
    regions = list(templates)
    home = templates[regions[0]]
    own: dict[str, Settings] = {}
    for region in regions:
        if own:  # after the home region: its lease key, replicated
            _replicate_secret(endpoint_url, stage, regions[0], region)
        template = _with_replicas(templates[region], home)
        own[region] = provision(endpoint_url, stage, template=template, region=region)
    buckets = {region: settings.segment_bucket for region, settings in own.items()}
    return {
        region: settings.model_copy(update={"regions": regions, "region": region, "segment_buckets": buckets})
        for region, settings in own.items()
    }


# What the home stack defines for every region: the control table (a global table, a replica in each
# region) and the lease-key secret (replicated). A region's own template may leave them out.
_REPLICATED = (c.LOGICAL_CONTROL_TABLE, c.LOGICAL_LEASE_KEY_SECRET)


def _with_replicas(template: dict[str, Any], home: dict[str, Any]) -> dict[str, Any]:
    """`template` with the home template's replicated resources where it has none of its own."""
    resources = template.get("Resources", {})
    missing = {lid: home["Resources"][lid] for lid in _REPLICATED if lid not in resources}
    return {**template, "Resources": {**resources, **missing}} if missing else template


def _replicate_secret(endpoint_url: str, stage: str, home: str, region: str) -> None:
    """The home region's lease-signing secret, with its value, in `region` (a replica)."""
    name = local_name(stage, c.LOGICAL_LEASE_KEY_SECRET)
    value = aws.client("secretsmanager", endpoint_url, home).get_secret_value(SecretId=name)["SecretString"]
    replica = aws.client("secretsmanager", endpoint_url, region)
    try:
        replica.describe_secret(SecretId=name)
    except replica.exceptions.ResourceNotFoundException:
        replica.create_secret(Name=name, SecretString=value)


@dataclass
class OutageRoutes:
    """`/_local/regions` on every region's port: list the regions, switch one down or up (admin token)."""

    regions: list[str]
    switch: OutageSwitch
    admin_token: str | None
    aws_endpoint_url: str  # the moto server every region shares (for `aws --endpoint-url`, tests)

    def __call__(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes] | None:
        found = OUTAGE_PATH.match(path)
        if path != REGIONS_PATH and not found:
            return None
        refused = self._refusal(method, found is not None, headers)
        if refused is not None:
            return _answer_error(refused)
        if found:
            region = found["region"]
            if region not in self.regions:
                return _answer_error(errors.NotFound(f"no region {region!r} here; regions: {self.regions}"))
            self.switch.set(region, found["state"] == "down")
            log.warning("region %s is %s", region, found["state"])
        down = self.switch.down()
        regions = [{"region": r, "down": r in down} for r in self.regions]
        result = {"regions": regions, "aws_endpoint_url": self.aws_endpoint_url}
        return 200, {"Content-Type": "application/json"}, json.dumps(envelope(result)).encode()

    def _refusal(self, method: str, switching: bool, headers: dict[str, str]) -> errors.SluiceError | None:
        allowed = "POST" if switching else "GET"
        if method != allowed:
            return errors.MethodNotAllowed(f"{method} is not allowed here; use {allowed}", allow=allowed)
        given = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return errors.Unauthorized("an admin token is required (Authorization: Bearer ...)")
        if not self.admin_token or not hmac.compare_digest(token.encode(), self.admin_token.encode()):
            return errors.Forbidden("switching regions takes the admin token `sluice local` was started with")
        return None


def _answer_error(exc: errors.SluiceError) -> tuple[int, dict[str, str], bytes]:
    body = envelope(errors_=[{"code": exc.code, "message": exc.message}])
    headers = {"Content-Type": "application/json"}
    if isinstance(exc, errors.MethodNotAllowed):
        headers["Allow"] = exc.allow
    return status_of(exc), headers, json.dumps(body).encode()


@dataclass
class MultiRegionRuntime:
    """Every region of `regions` (home first) as a `LocalRuntime` on one moto server. `port` is the
    home region's; the next regions take the ports after it (0: free ports for all)."""

    regions: list[str]
    host: str = "127.0.0.1"
    port: int = 8787
    admin_token: str | None = None
    stage: str = "local"
    time_scale: float = 1.0
    run_schedules: bool = True
    inter_region_delay_ms: float = DEFAULT_INTER_REGION_DELAY_MS
    replication_lag_ms: float = DEFAULT_REPLICATION_LAG_MS
    extra_env: dict[str, str] = field(default_factory=dict)
    context: dict[str, str] = field(default_factory=dict)  # stack context besides `regions` (`-c`)

    def start(self) -> None:
        os.environ.update(LOCAL_AWS_ENV)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every call
        moto_patches.apply()
        self._state_dir = Path(tempfile.mkdtemp(prefix="sluice-local-regions-"))
        self.outage = OutageSwitch(self._state_dir / "regions-down.json")
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        self.runtimes: list[LocalRuntime] = []
        self.replicator: GlobalTableReplicator | None = None
        try:
            templates = {
                region: region_template(region, self.regions, self.context) for region in self.regions
            }
            settings = provision_regions(endpoint, self.stage, templates)
            home = settings[self.regions[0]]
            self.replicator = GlobalTableReplicator(
                [home.control_table], self.regions, self.replication_lag_ms / 1000, self.outage.is_down
            )
            self.replicator.start()
            routes = OutageRoutes(self.regions, self.outage, self.admin_token, endpoint)
            env = {
                c.ENV_LOCAL_OUTAGE_FILE: str(self.outage.path),
                c.ENV_LOCAL_INTER_REGION_DELAY_MS: f"{self.inter_region_delay_ms:g}",
                **self.extra_env,
            }
            for i, region in enumerate(self.regions):
                runtime = LocalRuntime(
                    host=self.host,
                    port=self.port + i if self.port else 0,
                    admin_token=self.admin_token if i == 0 else None,  # one token, in the home table
                    stage=self.stage,
                    time_scale=self.time_scale,
                    run_schedules=self.run_schedules,
                    extra_env=env,
                    region=region,
                    endpoint_url=endpoint,
                    template=templates[region],
                    provisioned=settings[region],
                    outage=self.outage,
                    admin_routes=routes,
                )
                runtime.start()
                self.runtimes.append(runtime)
            if not self.replicator.settle(READY_SETTLE_SECONDS):
                log.warning("control-table replication did not settle in %s s", READY_SETTLE_SECONDS)
        except BaseException:
            self.stop()
            raise

    @property
    def urls(self) -> list[tuple[str, str]]:
        """(URL, region) of every region's API, home first."""
        return [(runtime.url, runtime.region or "") for runtime in self.runtimes]

    def runtime(self, region: str) -> LocalRuntime:
        return next(runtime for runtime in self.runtimes if runtime.region == region)

    def stop(self) -> None:
        """Stop every region at once, in parallel (each kills its containers), then replication and
        moto: the whole deployment within `sluice local`'s stop grace."""
        stopping = [
            threading.Thread(target=_stop_one, args=(runtime,), name=f"stop-{runtime.region}")
            for runtime in self.runtimes
        ]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
        if self.replicator is not None:
            self.replicator.stop()
        self._moto.stop()
        shutil.rmtree(self._state_dir, ignore_errors=True)


def _stop_one(runtime: LocalRuntime) -> None:
    try:
        runtime.stop()
    except Exception:
        log.exception("stopping %s failed", runtime.region)
