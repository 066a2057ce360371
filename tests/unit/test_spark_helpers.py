"""The Spark jobs' plain-Python parts: Glue-style arguments, segment planning, the SDK's auth hook."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from glue_jobs.common import SegmentObject, covering, parse_args, plan_segment_tasks, sigv4_auth
from sluice.client import SluiceClient


def test_parse_args_takes_glue_style_pairs_and_converts_to_the_defaults_types():
    defaults = {"queue": "", "batch_size": 100, "round_seconds": 30.0, "verify_output": False}
    argv = ["--JOB_NAME", "j", "--queue", "orders", "--batch-size=50", "--round-seconds", "2.5",
            "--verify-output", "--TempDir", "s3://t/"]  # fmt: skip
    args = parse_args(argv, defaults)
    assert args["queue"] == "orders" and args["batch_size"] == 50 and args["round_seconds"] == 2.5
    assert args["verify_output"] is True and args["JOB_NAME"] == "j" and args["TempDir"] == "s3://t/"
    stack = parse_args(["--sluice_api_url", "https://a", "--sluice_output_path", "s3://o/"], {"url": ""})
    assert stack["url"] == "https://a" and stack["output"] == "s3://o/"


def seg(shard: int, first: int, last: int) -> SegmentObject:
    return SegmentObject(f"segments/q/i/{shard}/{first:016d}-{last:016d}.ndjson.gz", "i", shard, first, last)


def test_a_compacted_segment_replaces_the_ones_it_covers_and_overlaps_are_read_once():
    segs = [seg(0, 0, 99), seg(0, 100, 199), seg(0, 0, 199), seg(0, 150, 260), seg(1, 0, 9)]
    assert [(s.shard, s.first, s.last) for s in covering(segs)] == [(0, 0, 199), (0, 150, 260), (1, 0, 9)]
    tasks = plan_segment_tasks(segs, {0: (120, 230)})
    assert [(t.shard, t.lo, t.hi) for t in tasks] == [(0, 120, 200), (0, 200, 230), (1, 0, 10)]


def test_segments_written_before_the_start_time_are_skipped_unread():
    old = SegmentObject("k-old", "i", 0, 0, 9, last_modified_ms=1_000_000)
    new = SegmentObject("k-new", "i", 0, 10, 19, last_modified_ms=2_000_000)
    tasks = plan_segment_tasks([old, new], None, start_ms=1_900_000, clock_skew_ms=100_000)
    assert [t.key for t in tasks] == ["k-new"]


def test_the_sdk_signs_every_request_with_the_auth_hook(monkeypatch):
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers.items()))
            body = b'{"success": true, "result": {"queues": []}}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    try:
        client = SluiceClient(
            f"http://127.0.0.1:{server.server_address[1]}", None, auth=sigv4_auth("eu-west-1")
        )
        assert client.list_queues() == []
    finally:
        server.shutdown()
        server.server_close()
    auth = seen[0]["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") and "/eu-west-1/execute-api/" in auth
    assert "X-Amz-Date" in seen[0] and "Bearer" not in auth
