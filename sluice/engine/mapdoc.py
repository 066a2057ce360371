"""The queue document as it is mirrored to SSM: compact, so a shard map of any size fits.

The control item keeps `Queue.model_dump_json()` (23,404 B at 256 shards); the mirror keeps what the
data plane reads, with the shard list as one character per shard id: `"s": [[first_id, "codes"], ...]`,
a code naming the shard's state and region (`CODES[3 * region index + state index]`), a new run after
every id no longer in the map. A shard's table is `id % tables` unless `x` says otherwise. 256 open
shards in one region are ~270 B; 768 in three interleaved regions ~800 B. What does not fit one SSM
value is split over several by the adapter (sluice/adapters/ssm.py).

Left out: each shard's `created_ms` and `parents` (shard lineage: `StreamReader.shard_ranges` reads the
control item for them); decoded shards carry the queue's `created_ms` and no parents. A document
written by an older version (the full `Queue` JSON) decodes as before.
"""

from __future__ import annotations

import json
from typing import Any

from sluice import constants as c
from sluice.models import Queue, Shard, ShardState

FORMAT = 2
STATES: tuple[ShardState, ...] = ("open", "sealed", "retired")
# Printable ASCII less '"' and '\\' (no JSON escaping): 92 codes, so 30 regions.
CODES = "".join(ch for ch in map(chr, range(33, 127)) if ch not in '"\\')
MAX_REGIONS = len(CODES) // len(STATES)
assert MAX_REGIONS == c.MAX_REGIONS
_EXCLUDED = {"shards", "next_shard_id"}


def encode(queue: Queue, tables: int) -> str:
    """The mirror document of `queue` (`tables`: the deployment's shard-table count)."""
    regions: list[str | None] = []
    for shard in queue.shards:
        if shard.region not in regions:
            regions.append(shard.region)
    if len(regions) > MAX_REGIONS:
        raise ValueError(f"a shard map spans at most {MAX_REGIONS} regions, this one {len(regions)}")
    runs: list[list[Any]] = []
    last = None
    for shard in sorted(queue.shards, key=lambda s: s.id):
        code = CODES[len(STATES) * regions.index(shard.region) + STATES.index(shard.state)]
        if last is not None and shard.id == last + 1:
            runs[-1][1] += code
        else:
            runs.append([shard.id, code])
        last = shard.id
    doc: dict[str, Any] = {
        "~": FORMAT,
        "q": queue.model_dump(mode="json", exclude=_EXCLUDED),
        "n": queue.next_shard_id,
        "t": tables,
        "r": regions,
        "s": runs,
    }
    tables_off = {str(s.id): s.table for s in queue.shards if s.table != s.id % tables}
    if tables_off:
        doc["x"] = tables_off
    return json.dumps(doc, separators=(",", ":"))


def decode(document: str) -> Queue:
    """A mirror document as a `Queue` (either format)."""
    raw = json.loads(document)
    if raw.get("~") != FORMAT:
        return Queue.model_validate(raw)  # the full document an older version wrote
    queue = raw["q"]
    tables, regions, tables_off = raw["t"], raw["r"], raw.get("x", {})
    shards = []
    for first, codes in raw["s"]:
        for offset, code in enumerate(codes):
            sid = first + offset
            region, state = divmod(CODES.index(code), len(STATES))
            shards.append(
                Shard(
                    id=sid,
                    table=tables_off.get(str(sid), sid % tables),
                    state=STATES[state],
                    created_ms=queue["created_ms"],
                    region=regions[region],
                )
            )
    return Queue.model_validate({**queue, "shards": shards, "next_shard_id": raw["n"]})
