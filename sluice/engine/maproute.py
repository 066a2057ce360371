"""What a HEAD item tells a container about the shard map, so that it learns of new shards without
polling SSM (docs/design.md "Map versions on HEAD items").

Whoever changes a queue's document stamps its region's HEAD items (open and sealed shards) with
`mv` = the document's version and `mo` = a route: the digest of everything in the document but the
shard map, the shard-table count, and the region's open shard ids as ranges (`1a2b3c4d/4/0-63,70`).
Every allocation returns the HEAD, and every read of it sees it. A container whose cached document is
older than `mv` and whose digest matches only adopts the route (new shards open, missing ones sealed):
no SSM read, however many containers there are. A different digest (settings, pause, groups) or a
route too long for a HEAD (`MAX_ROUTE_CHARS`, which keeps the HEAD under 1 KB so an allocation still
costs one write unit) makes it read the document from SSM.
"""

from __future__ import annotations

import hashlib
import json

from sluice.models import Queue, Shard

MAX_ROUTE_CHARS = 600
_EXCLUDED = {"shards", "next_shard_id", "version", "fence", "fences"}


def config_digest(queue: Queue) -> str:
    """A digest of the document less its shard map and the coordinators' fences."""
    body = json.dumps(queue.model_dump(mode="json", exclude=_EXCLUDED), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(body.encode(), digest_size=4).hexdigest()


def ranges(ids: list[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` → `0-2,5,7-8`."""
    out: list[str] = []
    for sid in sorted(ids):
        if out and sid == int(out[-1].rsplit("-", 1)[-1]) + 1:
            out[-1] = f"{out[-1].split('-', 1)[0]}-{sid}"
        else:
            out.append(str(sid))
    return ",".join(out)


def parse_ranges(text: str) -> list[int]:
    ids: list[int] = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        ids += range(int(first), int(last or first) + 1)
    return ids


def route(queue: Queue, region: str | None, tables: int, home: str | None = None) -> str:
    """The `mo` stamp for `region`'s HEAD items: the digest alone when the open shards cannot be said in
    `MAX_ROUTE_CHARS`, or one of them sits in another table than `id % tables`."""
    digest = config_digest(queue)
    open_here = [s for s in queue.shards_in(region, home) if s.state == "open"]
    if any(s.table != s.id % tables for s in open_here):
        return digest
    stamp = f"{digest}/{tables}/{ranges([s.id for s in open_here])}"
    return stamp if len(stamp) <= MAX_ROUTE_CHARS else digest


def adopt(queue: Queue, region: str | None, stamp: str, home: str | None = None) -> Queue | None:
    """`queue` with `region`'s open shards as `stamp` says (None: the stamp cannot be adopted, read the
    document). New ids become open shards of `region`; open ones the stamp leaves out become sealed."""
    digest, _, rest = stamp.partition("/")
    if not rest or digest != config_digest(queue):
        return None
    tables_text, _, open_text = rest.partition("/")
    tables, open_ids = int(tables_text), set(parse_ranges(open_text))
    shards: list[Shard] = []
    known: set[int] = set()
    for shard in queue.shards:
        known.add(shard.id)
        if (shard.region or home) != region:
            shards.append(shard)
        elif shard.id in open_ids and shard.state != "open":
            return None  # a shard never reopens: this stamp is older than what we hold
        elif shard.id not in open_ids and shard.state == "open":
            shards.append(shard.model_copy(update={"state": "sealed"}))
        else:
            shards.append(shard)
    added = [
        Shard(id=sid, table=sid % tables, created_ms=queue.created_ms, region=region)
        for sid in sorted(open_ids - known)
    ]
    if added and added[0].id < queue.next_shard_id:
        return None  # ids below next_shard_id we do not know were dropped (retired): not a new shard
    next_id = max([queue.next_shard_id, *(s.id + 1 for s in added)])
    return queue.model_copy(update={"shards": shards + added, "next_shard_id": next_id})
