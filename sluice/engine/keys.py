"""The storage schema, in one place: every item key and every attribute name the engine reads or writes,
used by the stores that own them (the shard tables' items: `sluice.engine.store`). See docs/design.md
for the table layout. Segment object keys belong to the segment format shared with the Glue jobs
(`sluice.segmentformat.segment_key`); the segment index item's own fields are `sluice.segments.SegmentRef`.
"""

from __future__ import annotations

from sluice import constants
from sluice.models import Queue
from sluice.offsets import seq_key

# Every table's key schema (the stacks declare the same names from sluice.constants)
PK = constants.PARTITION_KEY
SK = constants.SORT_KEY
TTL = constants.TTL_ATTRIBUTE  # the tables' TTL attribute (epoch seconds)
NEW_ITEM = f"attribute_not_exists({PK})"  # condition: no item with this key yet
ITEM_EXISTS = f"attribute_exists({PK})"

# Control table
QUEUE_SK = "QUEUE"
QUEUE_INDEX_PK = "QUEUES"  # one item per queue under this key, for paged listing
TOKENS_PK = "TOKENS"  # listing: one item per token id
TOKEN_SK = "TOKEN"
ACCESS_KEY_SK = "AK"
QUEUE_ID_SK = "QID"  # under queue_id_pk(id): the name of the queue with that id
# Under queue_pk(name): the map stamp of one region (route_sk), as on its HEADs (HEAD_MAP_VERSION,
# HEAD_MAP_ROUTE): what a broker whose every shard throttles reads, a HEAD being out of reach then.
QUEUE_ROUTE_SK = "ROUTE"
PURGE_SK = "PURGE"  # under queue_pk(name): when the last purge ran
PULL_CONSUMER_SK = "PULLCONSUMER"  # under queue_pk(name): the Cloudflare face's http_pull consumer
CONSUMER_SK_PREFIX = "CONSUMER#"  # under queue_pk(name): a push consumer's config
SLOT_SK_PREFIX = "CSLOT#"  # under queue_pk(name): a push worker's slot (`CSLOT#<consumer>#<slot>`)
COORDINATOR_PK = "COORDINATOR"  # the coordinator's ownership item and its per-queue saved state
COORDINATOR_OWNERSHIP_SK = "LEASE"  # coordinator_ownership_sk(...): one ownership item per region
COORDINATOR_STATE_SK_PREFIX = "STATE#"
COORDINATOR_PRUNED_SK = "PRUNED"  # when the region's SSM path was last listed for lingering mirrors
PRUNED_AT = "at"
COORDINATOR_WAKE_SK = "WAKE"  # per region: when a broker last woke the coordinator, or it last passed
WAKE_AT = "at"
IDEMPOTENCY_PK_PREFIX = "IDEM"  # Powertools' key prefix; the record's sk is IDEMPOTENCY_SK
IDEMPOTENCY_SK = "IDEM"
SEGMENT_INDEX_PK_PREFIX = "SEG#"  # segment_index_pk(...): one item per segment, sk = its first sequence

# Control-table document items (queue, push / pull consumer, coordinator state, purge)
QUEUE_VERSION = "version"  # queue item: the document's version (the condition of every change)
QUEUE_FENCE = "fence"  # queue item: the single-region coordinator's fence (see fence_attribute)
DOC = "doc"  # the item's JSON document (a pydantic model or the coordinator's saved state)
INCARNATION = "inc"  # the queue incarnation the item belongs to (stale ones are ignored / replaced)
PURGE_STARTED_MS = "ms"  # under PURGE_SK: when the last purge started
QUEUE_NAME = "name"  # under QUEUE_ID_SK: the name of the queue with that id
CREATED_MS = "created_ms"  # listing items (QUEUE_INDEX_PK, TOKENS_PK) and token items
TOKEN_ID = "token_id"  # token item (token_pk): the id its listing item (TOKENS_PK) is keyed by
TOKEN_DIGEST = "digest"  # listing item: the token's SHA-256, to find and drop its token item
TOKEN_QUEUE = "queue"  # both: the queue the token is bound to (`*`: all)
TOKEN_SCOPES = "scopes"
TOKEN_ACCESS_KEY = "ak"  # both: the SQS access key id issued to the token, if any
TOKEN_EXPIRES_MS = "expires_ms"  # both, when minted with a lifetime: refused from then on

# Shard tables
HEAD_SK = "HEAD"
MSG_SK_PREFIX = "M#"
GROUP_STATE_SK_PREFIX = "G#"
MSG_SK_END = "M#~"  # sorts after every M#<digits>

# HEAD item attributes
HEAD_NEXT = "next"  # the next sequence to allocate
HEAD_TS = "ts"  # timestamp (ms) of the latest allocation
HEAD_FLOOR = "floor"  # set by purge: every sequence below it is gone for every group
HEAD_SEALED = "sealed"  # the shard takes no more writes; `next` is final
HEAD_SEALED_MS = "sealed_ms"
HEAD_FLUSHED = "flushed"  # every sequence below it is in an S3 segment
HEAD_TTL_SET = "ttl_set"  # bottomless queues: items below it have their TTL set after the flush
HEAD_PRODUCER_VERSION = "pver"  # the highest producer version seen (fences older producers)
# Stamped by whoever changes the queue's document (sluice/engine/maproute.py): its version, and the
# route of the HEAD's region (config digest / table count / open shard ids) a container adopts.
HEAD_MAP_VERSION = "mv"
HEAD_MAP_ROUTE = "mo"
# Write counters (sluice.engine.counters): requests, messages, bytes, throttles, conflicts
HEAD_COUNTERS = ("wreq", "wmsgs", "wbytes", "thr", "cfl")

# HEAD attributes of the open Durable Streams face (sluice.engine.openstreams / openforks)
OS_GUARD = "osv"  # bumped by every write of this face: optimistic concurrency on the head
OS_CLOSED = "osc"  # the stream is closed
OS_CLOSER = "oscb"  # the producer (epoch, seq) whose append closed it
OS_SEQ = "osq"  # the last Stream-Seq accepted
OS_PRODUCERS = "osp"  # producer id -> {OS_PRODUCER_EPOCH, OS_PRODUCER_SEQ}
OS_PRODUCER_EPOCH = "e"
OS_PRODUCER_SEQ = "s"
OS_TOUCHED = "ost"  # last write or read (ms), for TTL expiry
OS_REFS = "osf"  # how many forks refer to this stream
OS_GONE = "osd"  # deleted (soft while OS_REFS > 0)

# Batch item (`M#<first seq>`) attributes
ITEM_COUNT = "n"  # messages in the item
ITEM_TS = "ts"  # timestamp (ms) shared by its messages
ITEM_DATA = "d"  # the encoded batch (sluice.codec)
ITEM_GAP = "gap"  # a tombstone for sequences allocated and never written (sluice.engine.gaps)
ITEM_PAYLOAD = "p"  # payload tier: the S3 key of the object holding the bodies (`d` is then the index)
ITEM_PAYLOAD_BASE = "pb"  # payload tier: where this item's first body starts in that object (absent: 0)

# Group state items: one per lane of a group on a shard, pk `lane_partition(shard pk, lane)`, sk `G#<group>`
# (lane 0: the shard's own partition, the item of before the lanes)
# (sluice.engine.lanes). Every lane item:
STATE_BLOB = "s"  # the lane's GroupState.encode()
STATE_VERSION = "ver"  # for conditional commits
STATE_ACKED = "ak"  # acks recorded by ADD, not folded into `s` yet: "<first seq>:<count>" runs (string set)
STATE_ACKS_ADDED = "an"  # how many ADDs recorded acks (only grows): a redelivering commit conditions on it
STATE_AT = "at"  # when the lane was last committed (ms): pullers choosing a lane prefer idle ones
STATE_READ = "rd"  # lane 0: its read level, as a number (a split starts the cursor there, atomically)
STATE_RETIRED = "rt"  # a stripe lane: the epoch whose merge retired it (absent: never retired)
# Lane 0's item, while the group's lanes are split (absent: one lane reads the whole shard):
CURSOR_NEXT = "cur"  # the first sequence no lane has claimed
CURSOR_LANES = "ln"  # lanes that may claim
CURSOR_HIGH = "hw"  # lanes that may hold work
CURSOR_STRIPE = "sb"  # block size of a striped split (absent: lanes claim ranges)
CURSOR_EPOCH = "ep"  # striped splits so far (only grows; a merge keeps it): the stripes' epoch
CURSOR_CEILING = "lc"  # lanes pullers may widen to (absent: lanes.MAX_LANES); the coordinator raises it
RANGE_LO = "lo"  # + lane number: the first sequence of the lane's latest claim
RANGE_HI = "hi"  # + lane number: the end (exclusive) of it

# Segment index item (`segment_index_pk`) attributes read by other modules (the rest: sluice.segments)
SEGMENT_LAST = "last"  # the last sequence the segment holds
SEGMENT_KEY = "key"  # its S3 object key

# Ownership items (the coordinator's, push slots'): see sluice.engine.ownership
OWNER_HOLDER = "holder"
OWNER_EXPIRES_MS = "exp_ms"
OWNER_TOKEN = "tok"
OWNER_RELEASED = "rel"


def queue_pk(name: str) -> str:
    return f"Q#{name}"


def queue_id_pk(queue_id: str) -> str:
    return f"QID#{queue_id}"


def token_pk(digest: str) -> str:
    return f"TOKEN#{digest}"


def access_key_pk(access_key_id: str) -> str:
    """An SQS access key (SigV4 on the SQS face): its token's id, queue and scopes (`ACCESS_KEY_SK`)."""
    return f"AK#{access_key_id}"


def consumer_sk(consumer_id: str) -> str:
    return f"{CONSUMER_SK_PREFIX}{consumer_id}"


def slot_prefix(consumer_id: str) -> str:
    return f"{SLOT_SK_PREFIX}{consumer_id}#"


def slot_sk(consumer_id: str, slot: int) -> str:
    return f"{slot_prefix(consumer_id)}{slot:04d}"


def slot_of(sk: str) -> int:
    return int(sk.rsplit("#", 1)[1])


def route_sk(region: str | None) -> str:
    """A queue's map stamp for `region` (None: the single region), next to its document."""
    return QUEUE_ROUTE_SK if region is None else f"{QUEUE_ROUTE_SK}#{region}"


def coordinator_ownership_sk(base: str, region: str | None) -> str:
    """The ownership item of the coordinator of `region` (None: the single-region one, `base` itself)."""
    return base if region is None else f"{base}#{region}"


def coordinator_state_sk(queue_name: str, region: str | None = None) -> str:
    """A queue's saved coordinator state, one per region (queue names never contain '#')."""
    scope = "" if region is None else f"{region}#"
    return f"{COORDINATOR_STATE_SK_PREFIX}{scope}{queue_name}"


def fence_attribute(region: str | None) -> str:
    """The queue item attribute holding `Queue.fence_of(region)`, the condition of fenced map writes."""
    return QUEUE_FENCE if region is None else f"{QUEUE_FENCE}#{region}"


def shard_pk(queue: Queue, shard_id: int) -> str:
    """Scoped by incarnation: a queue deleted and made again never sees the old one's items."""
    return shard_partition(queue.name, queue.incarnation, shard_id)


def shard_partition(queue_name: str, incarnation: str, shard_id: int) -> str:
    return f"{queue_name}#{incarnation}#{shard_id}"


def segment_index_pk(queue_name: str, incarnation: str, shard_id: int) -> str:
    return f"{SEGMENT_INDEX_PK_PREFIX}{queue_name}#{incarnation}#{shard_id}"


def msg_sk(seq: int) -> str:
    return f"{MSG_SK_PREFIX}{seq_key(seq)}"


def seq_of(sk: str) -> int:
    return int(sk[len(MSG_SK_PREFIX) :])


def overflow_key(shard_pk: str, seq: int) -> str:
    """The segment-bucket object of a body too large for its batch item."""
    return f"{constants.OVERFLOW_PREFIX}{shard_pk}/{seq_key(seq)}"


def group_state_sk(group: str) -> str:
    return f"{GROUP_STATE_SK_PREFIX}{group}"


def lane_partition(shard_partition_key: str, lane: int) -> str:
    """Where a group's lane lives. Lane 0 is the group-state item of before the lanes (same key: a
    deployed queue's groups read on where they were); the other lanes, which exist only under load, get
    partitions of their own so their commits never share the shard's write capacity."""
    return shard_partition_key if lane == 0 else f"{shard_partition_key}#{lane}"
