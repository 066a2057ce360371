"""Names shared by the CDK stack, the Lambda handlers and the local runtime.

Every resource name, environment variable and route lives here once, so the deployed stack and
the local runtime cannot drift apart: the stack reads these to build resources and wire
environments, the runtime reads them to provision moto and dispatch requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- Environment variables (set by the stack on every function, and by `sluice local`) -------------
ENV_CONTROL_TABLE: Final = "SLUICE_CONTROL_TABLE"
ENV_SHARD_TABLES: Final = "SLUICE_SHARD_TABLES"  # comma-separated table names, index = table slot
ENV_SEGMENT_BUCKET: Final = "SLUICE_SEGMENT_BUCKET"
ENV_SHARD_MAP_PREFIX: Final = "SLUICE_SHARD_MAP_PREFIX"  # SSM path; one parameter per queue below it
ENV_TOKEN_CACHE_TTL: Final = "SLUICE_TOKEN_CACHE_TTL_SECONDS"
ENV_AWS_ENDPOINT_URL: Final = "SLUICE_AWS_ENDPOINT_URL"  # moto server in the local runtime
ENV_STAGE: Final = "SLUICE_STAGE"
ENV_LEASE_KEY_SECRET: Final = "SLUICE_LEASE_KEY_SECRET"  # Secrets Manager id of the lease-signing keys
ENV_LEASE_KEY_CACHE_TTL: Final = "SLUICE_LEASE_KEY_CACHE_TTL_SECONDS"
ENV_ADMIN_TOKEN: Final = "SLUICE_ADMIN_TOKEN"
ENV_CONSUMER_FUNCTION: Final = "SLUICE_CONSUMER_FUNCTION"  # push workers started by the coordinator
ENV_SHARD_FUNCTION: Final = "SLUICE_SHARD_FUNCTION"  # flush/compaction work started by the coordinator
ENV_COORDINATOR_FUNCTION: Final = "SLUICE_COORDINATOR_FUNCTION"  # brokers wake it when shards throttle
MAX_REGIONS: Final = 30  # regions one shard map may span (sluice/engine/mapdoc.py: 3 codes per region)
# Coordinator tuning (docs/design.md "Coordinator"); all optional, defaults in engine/coordinator/config.py.
ENV_COORDINATOR_LOOP_SECONDS: Final = "SLUICE_COORDINATOR_LOOP_SECONDS"  # keep deciding this long per run
ENV_COORDINATOR_PERIOD_SECONDS: Final = "SLUICE_COORDINATOR_PERIOD_SECONDS"  # between passes in a run
ENV_SHARD_FLUSH_SECONDS: Final = "SLUICE_SHARD_FLUSH_SECONDS"  # new records are flushed this often
ENV_SHARD_MAINTENANCE_SECONDS: Final = "SLUICE_SHARD_MAINTENANCE_SECONDS"  # compaction + retention sweep
ENV_COORDINATOR_LEASE_SECONDS: Final = "SLUICE_COORDINATOR_LEASE_SECONDS"
ENV_SHARD_WCU_CEILING: Final = "SLUICE_SHARD_WCU_CEILING"  # write units/s one shard may take (1000)
ENV_SCALE_DOWN_AFTER_SECONDS: Final = "SLUICE_SCALE_DOWN_AFTER_SECONDS"
ENV_LAMBDA_ENDPOINT_URL: Final = "SLUICE_LAMBDA_ENDPOINT_URL"  # the local runtime serves Lambda Invoke
ENV_ALLOW_LOCAL_WEBHOOKS: Final = "SLUICE_ALLOW_LOCAL_WEBHOOKS"  # http://127.0.0.1 targets (local only)
# Tests: append every AWS call a handler makes (function, IAM action, resource ARN) to this JSON-lines
# file; `sluice.local.iamcheck` then checks each against that function's role in the template.
ENV_IAM_AUDIT_FILE: Final = "SLUICE_IAM_AUDIT_FILE"
# Tests: append EVERY AWS call a handler makes (time, function, the call's region, the caller's region,
# operation) to this JSON-lines file, to count calls (the IAM audit above records each distinct call once).
ENV_CALL_LOG_FILE: Final = "SLUICE_CALL_LOG_FILE"
# Tests (`make test`, the whole suite): also fail when a role grants an action no recorded call used
# (`sluice.local.iamcheck.unused`); a partial run cannot judge that, so it is off unless set.
ENV_IAM_UNUSED_CHECK: Final = "SLUICE_IAM_UNUSED_CHECK"
# Open Durable Streams protocol: stream paths starting with this prefix are served without a token
# (`*`: every path). Off (unset) by default; for conformance runs and public demo streams only.
ENV_OPEN_STREAM_PREFIX: Final = "SLUICE_OPEN_STREAM_PREFIX"

# Multi-region deployments (`-c regions=a,b`; unset: one region, as before). The first region listed is
# the home region: it holds the authoritative control items (the conditional writes that fence).
ENV_REGIONS: Final = "SLUICE_REGIONS"  # comma-separated, home region first
ENV_REGION: Final = "SLUICE_REGION"  # the region this process serves (its shards, its bucket)
ENV_SEGMENT_BUCKETS: Final = "SLUICE_SEGMENT_BUCKETS"  # `region=bucket,...`: every region's bucket
# `sluice local --regions` only (sluice/local/interregion.py): every AWS call to another region than
# SLUICE_REGION waits this long first; a region listed in the outage file is unreachable (its calls fail
# as connection errors) until it is listed no more.
ENV_LOCAL_INTER_REGION_DELAY_MS: Final = "SLUICE_LOCAL_INTER_REGION_DELAY_MS"
ENV_LOCAL_OUTAGE_FILE: Final = "SLUICE_LOCAL_OUTAGE_FILE"

# Powertools' own variables, set by the stack so handlers log/trace under one service name.
ENV_POWERTOOLS_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
SERVICE_NAME: Final = "sluice"
METRICS_NAMESPACE: Final = "Sluice"
# Published by the coordinator (EMF, dimension service=SERVICE_NAME, unit Seconds): the age of the oldest
# unacked message over all queues. The stack alarms on its Maximum.
METRIC_OLDEST_MESSAGE_AGE: Final = "OldestMessageAgeSeconds"
# Also published by the coordinator: over all queues (service dimension) and per queue (plus `queue`).
METRIC_BACKLOG: Final = "Backlog"
METRIC_SHARDS: Final = "Shards"
METRIC_WRITES_PER_SECOND: Final = "WritesPerSecond"
METRIC_THROTTLES_PER_SECOND: Final = "ThrottlesPerSecond"
METRIC_PUSH_WORKERS: Final = "PushWorkersStarted"

# Lambda's synchronous payload limit ("6 MB" per request and per response; read as 10^6 bytes, the
# stricter reading). A response over it reaches the client as API Gateway's 500.
LAMBDA_SYNC_PAYLOAD_BYTES: Final = 6_000_000

# --- Resources ----------------------------------------------------------------------------------------
DEFAULT_STAGE: Final = "dev"
DEFAULT_SHARD_TABLE_COUNT: Final = 4
# Shard-table capacity (CDK context `capacity`): on demand, or provisioned with target-tracking
# autoscaling (cheaper per unit at steady load; the bench prices it at this target utilization).
CAPACITY_ON_DEMAND: Final = "on_demand"
CAPACITY_PROVISIONED: Final = "provisioned"
DEFAULT_CAPACITY_TARGET_UTILIZATION_PERCENT: Final = 70
DEFAULT_CAPACITY_MIN_UNITS: Final = 5  # per shard table, read and write each
DEFAULT_CAPACITY_MAX_UNITS: Final = 4_000
DEFAULT_LAMBDA_MEMORY_MB: Final = 1024  # every function (CDK context `lambda_memory_mb`); the bench prices it
LAMBDA_MIN_MEMORY_MB: Final = 128  # what Lambda accepts
LAMBDA_MAX_MEMORY_MB: Final = 10_240
SHARD_MAP_PREFIX_TEMPLATE: Final = "/sluice/{stage}/shard-maps"
# Local and multi-region only: a single-region stack lets CloudFormation name the secret.
LEASE_KEY_SECRET_NAME_TEMPLATE: Final = "sluice/{stage}/lease-key"

# Key schema shared by every table: string partition key + string sort key, TTL on `exp`.
PARTITION_KEY: Final = "pk"
SORT_KEY: Final = "sk"
TTL_ATTRIBUTE: Final = "exp"
# Segment bucket: bodies too large for a DynamoDB item (`sluice.engine.keys.overflow_key`); the stack
# expires them and grants writes on this prefix only. Segment keys: `sluice.segmentformat.segment_key`.
OVERFLOW_PREFIX: Final = "overflow/"
# Segment bucket: payload-tier objects, the bodies of one send each (`sluice.engine.payloads`). Each is
# tagged with the days it must live; the stack expires `PAYLOAD_PREFIX` objects by that tag.
PAYLOAD_PREFIX: Final = "payload/"
PAYLOAD_DAYS_TAG: Final = "sluice-days"
PAYLOAD_MAX_DAYS: Final = 15  # the hot tier's 14 days, plus the day S3 rounds expiration up to

# Logical ids in the synthesized template; the local runtime finds resources by these.
LOGICAL_CONTROL_TABLE: Final = "ControlTable"
LOGICAL_SHARD_TABLE_PREFIX: Final = "ShardTable"
LOGICAL_SEGMENT_BUCKET: Final = "SegmentBucket"
LOGICAL_LEASE_KEY_SECRET: Final = "LeaseKeySecret"
S3_BUCKET_NAME_MAX: Final = 63


def physical_name(
    stage: str, logical_id: str, *, account: str | None = None, region: str | None = None
) -> str:
    """The deterministic name of a Sluice resource, from its logical id: one function for the
    multi-region stack (a function in one region names another region's tables, bucket and secret
    without cross-region references) and the local runtime (which names what it creates on moto).

    ControlTable -> `sluice-<stage>-control`, ShardTable<i> -> `sluice-<stage>-shards-<i>` (the same names
    in every region; the control table is one global table), SegmentBucket -> `sluice-<stage>-segments`,
    plus `-<account>-<region>` when both are given (S3 names are global: one bucket per account and
    region), LeaseKeySecret -> `sluice/<stage>/lease-key` (replicated to every region under that name),
    anything else -> `sluice-<stage>-<logical id in lower case>`.
    """
    if logical_id == LOGICAL_CONTROL_TABLE:
        return f"sluice-{stage}-control"
    index = logical_id.removeprefix(LOGICAL_SHARD_TABLE_PREFIX)
    if index != logical_id and index.isdigit():
        return f"sluice-{stage}-shards-{index}"
    if logical_id == LOGICAL_SEGMENT_BUCKET:
        suffix = f"-{account}-{region}" if account and region else ""
        return f"sluice-{stage}-segments{suffix}"
    if logical_id == LOGICAL_LEASE_KEY_SECRET:
        return LEASE_KEY_SECRET_NAME_TEMPLATE.format(stage=stage)
    return f"sluice-{stage}-{logical_id.lower()}"


# CDK construct ids of the stacks: the template files are `<id>.template.json` in the cloud assembly.
STACK_ID: Final = "SluiceStack"


def stack_id(region: str | None = None) -> str:
    """`SluiceStack` for a single-region deployment, `SluiceStack-<region>` for each region of several."""
    return f"{STACK_ID}-{region}" if region else STACK_ID


# --- Functions ----------------------------------------------------------------------------------------
FN_BROKER: Final = "broker"
FN_CONSUMER: Final = "consumer"
FN_SHARD: Final = "shard"
FN_COORDINATOR: Final = "coordinator"
FUNCTION_HANDLERS: Final = {
    FN_BROKER: "lambdas.broker.handler.lambda_handler",
    FN_CONSUMER: "lambdas.consumer.handler.lambda_handler",
    FN_SHARD: "lambdas.shard.handler.lambda_handler",
    FN_COORDINATOR: "lambdas.coordinator.handler.lambda_handler",
}
COORDINATOR_SCHEDULE_MINUTES: Final = 1  # the EventBridge rule; the coordinator loops inside each run
# How long an asynchronous start of the coordinator, shard work or a push worker may wait to run (Lambda's
# MaximumEventAgeInSeconds; 60 is the shortest it accepts): a start older than this is stale, the next
# pass starts again what is still needed. `sluice local` reads it back from the template.
ASYNC_MAX_EVENT_AGE_SECONDS: Final = 60
# Schedule knobs (CDK context of the same name, lower case): seconds. The stack sets them on the
# coordinator; `sluice local` reads them back from the template (divided by its time scale).
DEFAULT_COORDINATOR_TICK_SECONDS: Final = 5.0  # between coordinator passes inside one scheduled run
DEFAULT_SHARD_FLUSH_SECONDS: Final = 60.0
DEFAULT_SHARD_MAINTENANCE_SECONDS: Final = 60.0
SCHEDULE_ENV: Final = (
    ENV_COORDINATOR_PERIOD_SECONDS,
    ENV_COORDINATOR_LOOP_SECONDS,
    ENV_SHARD_FLUSH_SECONDS,
    ENV_SHARD_MAINTENANCE_SECONDS,
)
# `sluice local --time-scale N` (or this variable): run every schedule N times faster, same events.
ENV_LOCAL_TIME_SCALE: Final = "SLUICE_LOCAL_TIME_SCALE"


# --- HTTP routes -----------------------------------------------------------------------------------------
READ, WRITE, ADMIN = "read", "write", "admin"
NATIVE, STREAMS = "native", "streams"  # faces: how errors are rendered (envelope, or {"error": ...})
CLOUDFLARE = "cloudflare"  # the envelope too; `{queue_id}` may be a queue's 32-hex id or its name
OPEN_STREAMS = "open-streams"  # the open Durable Streams protocol: raw bodies, plain-text errors
CONSOLE = "console"  # the browser console's files: not an API operation, no token (the page signs in)
SQS = "sqs"  # Amazon SQS's JSON 1.0 and query protocols at the root: SigV4, SQS's error shapes
# The account id in the SQS face's queue URLs (`<base>/000000000000/<queue>`) and ARNs: a fixed literal, as
# ElasticMQ and LocalStack use, so the queue-URL route is `POST /000000000000/{queue}` and never shadows
# another face's two-segment paths (API Gateway prefers a non-greedy match such as `/{a}/{b}`).
SQS_ACCOUNT_ID: Final = "000000000000"


@dataclass(frozen=True)
class Route:
    """One HTTP API route: API Gateway syntax (`{name}`, greedy `{name+}`), the function serving it,
    and the token scopes it needs (checked before anything else; `queue_param` names the path
    parameter that holds the queue the token must be bound to; no scopes: no token needed), and the
    face whose error shape it uses (`native`, `cloudflare`: the envelope; `streams`: `{"error": ...}`)."""

    method: str
    path: str
    function: str
    scopes: tuple[str, ...]
    queue_param: str | None = None
    face: str = NATIVE

    @property
    def route_key(self) -> str:
        """API Gateway's `routeKey` for this route."""
        return f"{self.method} {self.path}"


_QP = "queue_name"
_V1_Q = "/v1/queues/{queue_name}"
_CF_QP = "queue_id"
CF_PREFIX = "/client/v4"  # Cloudflare's REST paths; {account_id} is ignored
_CF_QUEUES = f"{CF_PREFIX}/accounts/{{account_id}}/queues"
_CF_Q = f"{_CF_QUEUES}/{{queue_id}}"
_CF = CLOUDFLARE
_OSP = "path"
OPEN_STREAM_ROUTE_PREFIX: Final = "/v1/stream/"
CONSOLE_PATH: Final = "/console"
_OPEN_STREAM = OPEN_STREAM_ROUTE_PREFIX + "{path+}"

ROUTES: Final[tuple[Route, ...]] = (
    # Queue administration, tokens and operations: the broker (control-plane writes are rare).
    Route("POST", "/v1/queues", FN_BROKER, (ADMIN,)),
    Route("GET", "/v1/queues", FN_BROKER, (READ,)),  # a token bound to one queue lists that one
    Route("GET", _V1_Q, FN_BROKER, (READ,), _QP),
    Route("PATCH", _V1_Q, FN_BROKER, (ADMIN,), _QP),
    Route("DELETE", _V1_Q, FN_BROKER, (ADMIN,), _QP),
    Route("POST", "/v1/tokens", FN_BROKER, (ADMIN,)),
    Route("GET", "/v1/tokens", FN_BROKER, (ADMIN,)),
    Route("DELETE", "/v1/tokens/{token_id}", FN_BROKER, (ADMIN,)),
    Route("POST", "/v1/tokens/{token_id}/access-key", FN_BROKER, (ADMIN,)),
    # Sending.
    Route("POST", f"{_V1_Q}/messages", FN_BROKER, (WRITE,), _QP),
    # Pull consumers: acks change state, so they need write too (as Cloudflare's pull consumers do).
    Route("POST", f"{_V1_Q}/messages/pull", FN_CONSUMER, (READ,), _QP),
    Route("POST", f"{_V1_Q}/messages/ack", FN_CONSUMER, (READ, WRITE), _QP),
    Route("POST", f"{_V1_Q}/messages/lease", FN_CONSUMER, (READ, WRITE), _QP),
    Route("POST", f"{_V1_Q}/messages/peek", FN_CONSUMER, (READ,), _QP),
    # Queue semantics: consumer groups, operations and metrics (broker), the Cloudflare Queues face.
    Route("POST", f"{_V1_Q}/consumer-groups", FN_BROKER, (ADMIN,), _QP),
    Route("GET", f"{_V1_Q}/consumer-groups", FN_BROKER, (READ,), _QP),
    Route("GET", f"{_V1_Q}/consumer-groups/{{group}}", FN_BROKER, (READ,), _QP),
    Route("DELETE", f"{_V1_Q}/consumer-groups/{{group}}", FN_BROKER, (ADMIN,), _QP),
    Route("POST", f"{_V1_Q}/purge", FN_BROKER, (ADMIN,), _QP),
    Route("POST", f"{_V1_Q}/pause", FN_BROKER, (ADMIN,), _QP),
    Route("POST", f"{_V1_Q}/resume", FN_BROKER, (ADMIN,), _QP),
    Route("POST", f"{_V1_Q}/redrive", FN_BROKER, (ADMIN,), _QP),
    Route("GET", f"{_V1_Q}/metrics", FN_BROKER, (READ,), _QP),
    # The Cloudflare Queues face: every queue call of Cloudflare's REST API (docs/api.md has the table).
    Route("POST", f"{_CF_Q}/messages", FN_BROKER, (WRITE,), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/messages/batch", FN_BROKER, (WRITE,), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/messages/pull", FN_CONSUMER, (READ,), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/messages/ack", FN_CONSUMER, (READ, WRITE), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/messages/peek", FN_CONSUMER, (READ,), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/messages/purge", FN_CONSUMER, (READ, WRITE), _CF_QP, _CF),
    Route("POST", _CF_QUEUES, FN_BROKER, (ADMIN,), None, _CF),
    Route("GET", _CF_QUEUES, FN_BROKER, (ADMIN,), None, _CF),
    Route("GET", _CF_Q, FN_BROKER, (READ,), _CF_QP, _CF),
    Route("PUT", _CF_Q, FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("PATCH", _CF_Q, FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("DELETE", _CF_Q, FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("GET", f"{_CF_Q}/metrics", FN_BROKER, (READ,), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/purge", FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("GET", f"{_CF_Q}/purge", FN_BROKER, (READ,), _CF_QP, _CF),
    Route("POST", f"{_CF_Q}/consumers", FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("GET", f"{_CF_Q}/consumers", FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("GET", f"{_CF_Q}/consumers/{{consumer_id}}", FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("PUT", f"{_CF_Q}/consumers/{{consumer_id}}", FN_BROKER, (ADMIN,), _CF_QP, _CF),
    Route("DELETE", f"{_CF_Q}/consumers/{{consumer_id}}", FN_BROKER, (ADMIN,), _CF_QP, _CF),
    # Any other Cloudflare path: Cloudflare's envelope with 404 (10114), or 405 (10120) with `Allow`.
    Route("ANY", f"{CF_PREFIX}/{{proxy+}}", FN_BROKER, (), None, _CF),
    # Stream reads (offsets, time, per shard; long-poll) and the shard list with offset ranges.
    Route("GET", f"{_V1_Q}/records", FN_CONSUMER, (READ,), _QP),
    Route("GET", f"{_V1_Q}/shards", FN_CONSUMER, (READ,), _QP),
    # Durable Streams face: the name is the rest of the path (`P` and `P/child` are two streams); a
    # token bound to a queue name binds to the stream name. Other methods: 405 with `Allow`.
    Route("GET", "/streams/{name+}", FN_CONSUMER, (READ,), "name", STREAMS),
    Route("POST", "/streams/{name+}", FN_BROKER, (WRITE,), "name", STREAMS),
    Route("DELETE", "/streams/{name+}", FN_BROKER, (ADMIN,), "name", STREAMS),
    Route("ANY", "/streams/{name+}", FN_BROKER, (), None, STREAMS),
    # The open Durable Streams protocol (ElectricSQL's PROTOCOL.md): the stream is the rest of the path;
    # a token bound to a queue name binds to the stream path. Reads on the consumer, writes on the
    # broker; OPTIONS answers CORS preflights (browsers send no token with them).
    Route("GET", _OPEN_STREAM, FN_CONSUMER, (READ,), _OSP, OPEN_STREAMS),
    Route("HEAD", _OPEN_STREAM, FN_CONSUMER, (READ,), _OSP, OPEN_STREAMS),
    Route("PUT", _OPEN_STREAM, FN_BROKER, (WRITE,), _OSP, OPEN_STREAMS),
    Route("POST", _OPEN_STREAM, FN_BROKER, (WRITE,), _OSP, OPEN_STREAMS),
    Route("DELETE", _OPEN_STREAM, FN_BROKER, (ADMIN,), _OSP, OPEN_STREAMS),
    Route("OPTIONS", _OPEN_STREAM, FN_BROKER, (), None, OPEN_STREAMS),
    # The SQS face: every action on `POST /` (JSON 1.0 and query protocol) and on a queue's URL (query
    # protocol clients post there). SigV4 is verified by the face itself (the signature covers the
    # body), and each action's scope is checked against the queue it names: no token gate here.
    Route("POST", "/", FN_BROKER, (), None, SQS),
    Route("POST", f"/{SQS_ACCOUNT_ID}/{{queue_name}}", FN_BROKER, (), None, SQS),
    # Push consumers (coordinator area): admin, served by the broker.
    # The public keys that verify signed webhook deliveries (JWKS): public, so no token.
    Route("GET", "/v1/webhooks/jwks", FN_CONSUMER, ()),
    Route("POST", f"{_V1_Q}/consumers", FN_BROKER, (ADMIN,), _QP),
    Route("GET", f"{_V1_Q}/consumers", FN_BROKER, (ADMIN,), _QP),
    Route("GET", f"{_V1_Q}/consumers/{{consumer_id}}", FN_BROKER, (ADMIN,), _QP),
    Route("DELETE", f"{_V1_Q}/consumers/{{consumer_id}}", FN_BROKER, (ADMIN,), _QP),
    # The browser console: the page at CONSOLE_PATH, its modules and stylesheet one level below (no token:
    # the page asks for one and calls the routes above with it).
    Route("GET", CONSOLE_PATH, FN_BROKER, (), None, CONSOLE),
    Route("GET", f"{CONSOLE_PATH}/{{asset}}", FN_BROKER, (), None, CONSOLE),
)
# The functions behind the HTTP API run with SnapStart, which applies only to published versions: the
# API invokes them through this alias (on the newest version), never $LATEST.
API_FUNCTIONS: Final = frozenset(route.function for route in ROUTES)
API_ALIAS: Final = "live"
