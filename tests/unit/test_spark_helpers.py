"""The Spark jobs' plain-Python parts: typed Glue-style arguments, segment planning, the SDK's auth hook."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from glue_jobs.arguments import ArgumentError, parse_args
from glue_jobs.common import (
    SegmentObject,
    backs_off,
    call_with_conflict_retry,
    plan_segment_tasks,
    sigv4_auth,
)
from glue_jobs.pull_consumer import PullArgs, round_backlog
from glue_jobs.segment_reader import ReaderArgs
from sluice.client import SluiceApiError, SluiceClient
from sluice.segmentformat import segment_key

PULL = ["--url", "https://a", "--queue", "orders", "--output", "s3://o/", "--token", "t"]


def test_arguments_take_glue_style_pairs_into_the_jobs_typed_object():
    argv = ["--JOB_NAME", "j", "--queue", "orders", "--batch-size=50", "--round-seconds", "2.5",
            "--verify-output", "--TempDir", "s3://t/", "--job-bookmark-option", "job-bookmark-disable",
            "--sluice_api_url", "https://a", "--sluice_output_path", "s3://o/",
            "--sluice_token_secret_arn", "arn:aws:secretsmanager:eu-west-1:1:secret:x"]  # fmt: skip
    args = parse_args(PullArgs, argv)
    assert args == PullArgs(
        url="https://a", queue="orders", output="s3://o/", batch_size=50, round_seconds=2.5,
        verify_output=True, job_name="j", token_secret_arn="arn:aws:secretsmanager:eu-west-1:1:secret:x",
    )  # fmt: skip
    assert parse_args(PullArgs, [*PULL, "--verify_output", "false"]).verify_output is False
    reader = parse_args(
        ReaderArgs, ["--bucket", "b", "--queue", "q", "--shards", "0, 2", "--end-time-ms", "9"]
    )
    assert reader.shards == (0, 2) and reader.end_time_ms == 9 and reader.start_time_ms is None


def test_a_round_that_proved_the_group_drained_reports_the_proofs_backlog():
    """One task's last pull proved the group drained; another's was an estimate taken before (a race lost
    to a lane split): the round reports the proof, not the larger stale figure (the CI flake of stop 33)."""
    proof, stale = (0, 0, 0, None, 0, True), (1, 0, 100, None, 0, False)
    assert round_backlog([stale, proof]) == (True, 0)
    assert round_backlog([stale, (2, 5, 40, 1, 0, False)]) == (False, 100)
    assert round_backlog([(0, 0, None, None, 3, False)]) == (False, None)


@pytest.mark.parametrize(
    ("kind", "argv", "says"),
    [
        (PullArgs, PULL[2:], "the following arguments are required: --url"),
        (
            PullArgs,
            [*PULL, "--batch-size", "ten"],
            "argument --batch_size/--batch-size: invalid int value: 'ten'",
        ),
        (PullArgs, [*PULL, "--batch-size", "500"], "--batch-size must be 1..100, not 500"),
        (PullArgs, [*PULL, "--verify-output", "maybe"], "invalid boolean value: 'maybe'"),
        (PullArgs, PULL[:6], "give --token or --token-secret-arn (or --auth iam)"),
        (PullArgs, [*PULL, "--auth", "sigv4"], "--auth must be token or iam, not 'sigv4'"),
        (ReaderArgs, ["--bucket", "b"], "the following arguments are required: --queue"),
        (
            ReaderArgs,
            ["--bucket", "b", "--queue", "q", "--shards", "0,x"],
            "--shards: invalid int_list value",
        ),
        (
            ReaderArgs,
            ["--bucket", "b", "--queue", "q", "--ending-offsets", "[1]"],
            "--ending-offsets: expected",
        ),
        (
            ReaderArgs,
            ["--bucket", "b", "--queue", "q", "--starting-offsets", '{"0": "x"}'],
            "--starting-offsets",
        ),
    ],
)
def test_a_missing_or_malformed_argument_is_refused_by_name(kind, argv, says):
    with pytest.raises(ArgumentError) as refused:
        parse_args(kind, argv)
    assert says in str(refused.value)


def test_the_jobs_exit_with_the_argument_error_before_starting_spark(monkeypatch):
    from glue_jobs import pull_consumer, segment_reader

    def no_spark(*_args: object) -> None:
        raise AssertionError("started Spark with bad arguments")

    monkeypatch.setattr(pull_consumer, "spark_session", no_spark)
    monkeypatch.setattr(segment_reader, "spark_session", no_spark)
    with pytest.raises(SystemExit, match="pull_consumer: the following arguments are required: --queue"):
        pull_consumer.main(["--url", "https://a", "--output", "o", "--token", "t"])
    with pytest.raises(SystemExit, match="segment_reader: --output is required"):
        segment_reader.main(["--bucket", "b", "--queue", "q"])


def test_offset_arguments_take_offsets_or_sequences_per_shard():
    start = json.dumps({"0": f"{1_700_000_000_000:016d}{195:016d}", "1": 7})
    args = ReaderArgs(bucket="b", queue="q", starting_offsets=start, ending_offsets='{"0": 215}')
    assert args.ranges() == {0: (195, 215), 1: (7, 2**63)}


def seg(shard: int, first: int, last: int, modified_ms: int = 0) -> SegmentObject:
    found = SegmentObject.parse(segment_key("q", "i", shard, first, last))
    assert found is not None
    return SegmentObject(**{**found.__dict__, "last_modified_ms": modified_ms})


def test_a_compacted_segment_replaces_the_ones_it_covers_and_overlaps_are_read_once():
    segs = [seg(0, 0, 99), seg(0, 100, 199), seg(0, 0, 199), seg(0, 150, 260), seg(1, 0, 9)]
    tasks = plan_segment_tasks(segs, {0: (120, 230)})
    assert [(t.shard, t.lo, t.hi) for t in tasks] == [(0, 120, 200), (0, 200, 230), (1, 0, 10)]
    assert [t.key for t in tasks] == [segs[2].key, segs[3].key, segs[4].key]


def test_segments_written_before_the_start_time_are_skipped_unread():
    old, new = seg(0, 0, 9, modified_ms=1_000_000), seg(0, 10, 19, modified_ms=2_000_000)
    tasks = plan_segment_tasks([old, new], None, start_ms=1_900_000, clock_skew_ms=100_000)
    assert [t.key for t in tasks] == [new.key]


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


def test_a_puller_backs_off_from_contention_and_from_a_busy_front_door(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda _s: None)
    answers = [
        SluiceApiError(409, 10115, "a concurrent change won"),
        SluiceApiError(429, None, "Too Many Requests"),  # API Gateway past its quota, after the SDK's retries
        "acked",
    ]

    def ack() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert call_with_conflict_retry(ack) == "acked"
    assert backs_off(SluiceApiError(503, None, "Service Unavailable"))
    assert not backs_off(SluiceApiError(404, 10200, "queue not found"))
    answers[:] = [SluiceApiError(404, 10200, "queue not found"), "never reached"]
    with pytest.raises(SluiceApiError, match="404"):
        call_with_conflict_retry(ack)  # a failure of the request: no second try
