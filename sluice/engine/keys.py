"""Item keys, in one place. See docs/design.md for the table layout."""

from __future__ import annotations

from sluice.models import Queue
from sluice.offsets import seq_key

# Control table
QUEUE_SK = "QUEUE"
QUEUE_INDEX_PK = "QUEUES"  # one item per queue under this key, for paged listing
TOKENS_PK = "TOKENS"  # listing: one item per token id
TOKEN_SK = "TOKEN"
QUEUE_ID_SK = "QID"  # under queue_id_pk(id): the name of the queue with that id
PURGE_SK = "PURGE"  # under queue_pk(name): when the last purge ran

# Shard tables
HEAD_SK = "HEAD"
MSG_SK_PREFIX = "M#"
GROUP_STATE_SK_PREFIX = "G#"
MSG_SK_END = "M#~"  # sorts after every M#<digits>


def queue_pk(name: str) -> str:
    return f"Q#{name}"


def queue_id_pk(queue_id: str) -> str:
    return f"QID#{queue_id}"


def token_pk(digest: str) -> str:
    return f"TOKEN#{digest}"


def shard_pk(queue: Queue, shard_id: int) -> str:
    """Scoped by incarnation: a queue deleted and made again never sees the old one's items."""
    return f"{queue.name}#{queue.incarnation}#{shard_id}"


def msg_sk(seq: int) -> str:
    return f"{MSG_SK_PREFIX}{seq_key(seq)}"


def seq_of(sk: str) -> int:
    return int(sk[len(MSG_SK_PREFIX) :])


def group_state_sk(group: str) -> str:
    return f"{GROUP_STATE_SK_PREFIX}{group}"
