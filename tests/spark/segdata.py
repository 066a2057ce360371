"""Segment objects written exactly as docs/design.md specifies, and a fake records API (the hot tail)."""

from __future__ import annotations

import base64
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

BASE_MS = 1_700_000_000_000
INC = "0000beef"


def record(shard: int, seq: int, ts_step: int = 10) -> dict[str, Any]:
    ts = BASE_MS + seq * ts_step + shard
    body = json.dumps({"shard": shard, "seq": seq}, separators=(",", ":")).encode()
    return {
        "offset": f"{ts:016d}{seq:016d}",
        "shard": shard,
        "seq": seq,
        "id": f"{INC}{shard:04x}{seq:012x}",
        "timestamp_ms": ts,
        "content_type": "json",
        "body_b64": base64.b64encode(body).decode(),
        "partition_key": None,
        "attributes": {"seq": str(seq)},
    }


def put_segment(s3: Any, bucket: str, queue: str, shard: int, first: int, last: int, skip=()) -> list[dict]:
    """One gzip NDJSON object for [first, last]; sequences in `skip` are gaps (not written)."""
    recs = [record(shard, s) for s in range(first, last + 1) if s not in set(skip)]
    key = f"segments/{queue}/{INC}/{shard}/{first:016d}-{last:016d}.ndjson.gz"
    data = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in recs))
    s3.put_object(Bucket=bucket, Key=key, Body=data)
    return recs


def native(rec: dict[str, Any]) -> dict[str, Any]:
    """A segment record as the records API returns it (native body rule)."""
    out = {k: rec[k] for k in ("offset", "shard", "id", "timestamp_ms", "content_type", "partition_key")}
    out["attributes"] = rec["attributes"]
    out["body"] = json.loads(base64.b64decode(rec["body_b64"]))
    return out


class FakeRecordsApi:
    """`GET /v1/queues/{q}/shards` and `/records?shard=&offset=&limit=` over in-memory hot records."""

    def __init__(self) -> None:
        self.hot: dict[int, list[dict[str, Any]]] = {}
        self.calls: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                api.calls.append(self.path)
                q = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path.endswith("/shards"):
                    result: Any = {
                        "shards": [
                            {"shard": s, "next_seq": (recs[-1]["seq"] + 1) if recs else 0}
                            for s, recs in sorted(api.hot.items())
                        ]
                    }
                else:
                    shard, offset, limit = int(q["shard"]), q.get("offset", "-"), int(q.get("limit", 10))
                    after = -1 if offset == "-" else int(offset[16:])
                    recs = [native(r) for r in api.hot.get(shard, []) if r["seq"] > after][:limit]
                    result = {"records": recs, "next_offset": recs[-1]["offset"] if recs else offset}
                data = json.dumps({"success": True, "errors": [], "result": result}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
