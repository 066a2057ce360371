"""The Durable Streams face through the real handlers: API.md's contract, error bodies included."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from tests.conftest import ADMIN_TOKEN


def _call(method, path, body=None, *, query="", raw=None, headers=None, token=ADMIN_TOKEN):
    """(status, headers, parsed body, raw text) from the handler API Gateway would invoke."""
    from sluice.local import gateway
    from sluice.local.workers import invoke

    route, params = gateway.match(method, path)
    all_headers = [("content-type", "application/json"), *(headers or {}).items()]
    if token is not None:
        all_headers.append(("authorization", f"Bearer {token}"))
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    event = gateway.build_event(route, params, method, path, query, all_headers, data)
    status, out_headers, _, out = gateway.unpack_response(invoke(route.function, event))
    text = out.decode()
    return status, out_headers, (json.loads(text) if text else None), text


@pytest.fixture
def stream(engine) -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def _post(stream, records, version=None, **kw):
    query = f"version={version}" if version is not None else ""
    return _call("POST", f"/streams/{stream}", {"records": records}, query=query, **kw)


def _get(stream, query="offset=-&limit=1000", **kw):
    return _call("GET", f"/streams/{stream}", query=query, **kw)


VALUES = [{"a": {"b": [1, 2]}}, "x\ny\r\n", "héllo 🌊 水流 ✓", 42, -0.5, None, False, [], ""]


def test_values_round_trip_exactly(stream):
    status, _, body, _ = _post(stream, VALUES)
    assert status == 200, body
    assert len(body["offsets"]) == len(VALUES)
    assert all(len(o) == 32 and o.isdigit() for o in body["offsets"])
    assert body["offsets"] == sorted(body["offsets"])
    status, headers, body, text = _get(stream)
    assert status == 200 and headers["Content-Type"] == "application/json"
    data = [r["data"] for r in body["records"]]
    assert data == VALUES
    assert [type(v) for v in data] == [type(v) for v in VALUES]  # 42 stays int, -0.5 float, false bool
    # Byte for byte: each record's data is the compact JSON text of what was sent, numbers as written.
    sent = [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in VALUES]
    assert _data_texts(text) == sent


def _data_texts(text: str) -> list[str]:
    """The exact source text of every `data` value in a response body."""
    decoder, out, pos = json.JSONDecoder(), [], 0
    while (pos := text.find('"data":', pos)) != -1:
        start = pos + len('"data":')
        _, end = decoder.raw_decode(text, start)
        out.append(text[start:end])
        pos = end
    return out


def test_numbers_keep_their_text(stream):
    _call("POST", f"/streams/{stream}", raw=b'{"records": [1.10, 1e2, -0.0, 12345678901234567890]}')
    _, _, _, text = _get(stream)
    assert _data_texts(text) == ["1.10", "1e2", "-0.0", "12345678901234567890"]


def test_offsets_read_strictly_after_and_absent_means_new_only(stream):
    _, _, body, _ = _post(stream, [1, 2, 3])
    first, second, _third = body["offsets"]
    _, _, body, _ = _get(stream, f"offset={first}")
    assert [r["data"] for r in body["records"]] == [2, 3]
    assert body["records"][0]["offset"] == second
    _, _, body, _ = _get(stream, "offset=-&limit=2")
    assert [r["data"] for r in body["records"]] == [1, 2]
    _, _, body, _ = _get(stream, "")
    assert body == {"records": []}
    _, _, body, _ = _get(stream, "offset=-&limit=5000")  # clamped, not refused
    assert len(body["records"]) == 3


def test_never_written_stream_reads_empty(stream):
    status, _, body, _ = _get(stream)
    assert (status, body) == (200, {"records": []})


def test_version_fencing(stream):
    assert _post(stream, [1], version=5)[0] == 200
    status, _, body, _ = _post(stream, [2], version=3)
    assert status == 409
    assert body == {"error": "Producer version too old", "current_version": 5, "provided_version": 3}
    assert _post(stream, [3], version=5)[0] == 200
    assert _post(stream, [4])[0] == 200  # absent: always allowed
    status, _, body, _ = _post(stream, [], version=9)
    assert (status, body) == (200, {"version": 9})  # a pure version bump
    status, _, body, _ = _post(stream, [5], version=8)
    assert status == 409 and body["current_version"] == 9
    _, _, body, _ = _get(stream)
    assert [r["data"] for r in body["records"]] == [1, 3, 4]
    # DELETE resets the version.
    assert _call("DELETE", f"/streams/{stream}")[2] == {"success": True}
    assert _post(stream, [6], version=1)[0] == 200
    _, _, body, _ = _get(stream)
    assert [r["data"] for r in body["records"]] == [6]


@pytest.mark.parametrize(
    ("raw", "query", "error"),
    [
        (b"{not json", "", "Invalid JSON body"),
        (b"[1, 2]", "", "Body must be a JSON object with a 'records' array"),
        (b'{"records": 1}', "", "Body must be a JSON object with a 'records' array"),
        (b'{"data": []}', "", "Body must be a JSON object with a 'records' array"),
        (b'{"records": [NaN]}', "", "Invalid JSON body"),
        (b'{"records": [1]}', "version=abc", "Invalid version parameter"),
        (b'{"records": [1]}', "version=-1", "Invalid version parameter"),
        (b'{"records": [1]}', "version=1.5", "Invalid version parameter"),
    ],
)
def test_bad_posts_are_400_and_change_nothing(stream, raw, query, error):
    status, _, body, _ = _call("POST", f"/streams/{stream}", raw=raw, query=query)
    assert (status, body) == (400, {"error": error})
    assert _get(stream)[2] == {"records": []}


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("limit=0", "Invalid limit parameter"),
        ("limit=x", "Invalid limit parameter"),
        ("limit=-3", "Invalid limit parameter"),
        ("timeout_sec=-1", "Invalid timeout_sec parameter"),
        ("timeout_sec=abc", "Invalid timeout_sec parameter"),
        ("timeout_sec=nan", "Invalid timeout_sec parameter"),
        ("offset=12345", "Invalid offset parameter"),
    ],
)
def test_bad_reads_are_400(stream, query, error):
    status, _, body, _ = _get(stream, query)
    assert (status, body) == (400, {"error": error})


def test_body_over_1_mib_is_413(stream):
    """1 MiB, not 8: a larger body cannot reach the function inside Lambda's 6 MB request."""
    raw = b'{"records": ["' + b"x" * (1024 * 1024) + b'"]}'
    status, _, body, _ = _call("POST", f"/streams/{stream}", raw=raw)
    assert status == 413 and body == {"error": "Request body exceeds 1 MiB"}


def test_other_methods_are_405_with_allow(stream):
    for method in ("PUT", "PATCH"):
        status, headers, body, _ = _call(method, f"/streams/{stream}", {"records": []})
        assert status == 405 and headers["Allow"] == "GET, POST, DELETE" and "error" in body


def test_parent_and_child_are_separate_streams(stream):
    _post(stream, ["parent"])
    _post(f"{stream}/child", ["child"])
    assert [r["data"] for r in _get(stream)[2]["records"]] == ["parent"]
    assert [r["data"] for r in _get(f"{stream}/child")[2]["records"]] == ["child"]
    _call("DELETE", f"/streams/{stream}/child")
    assert [r["data"] for r in _get(stream)[2]["records"]] == ["parent"]


def test_name_over_256_characters_is_414(engine):
    status, _, body, _ = _get("n" * 257)
    assert status == 414 and "error" in body
    assert _post("n" * 256, [1])[0] == 200


def test_delete_unknown_stream_is_404(stream):
    status, _, body, _ = _call("DELETE", f"/streams/{stream}")
    assert status == 404 and body == {"error": "Stream not found"}


def test_auth_header_and_stream_bound_tokens(engine, stream):
    _, token = engine.tokens.create(f"{stream}/child", ["read", "write"])
    assert _post(f"{stream}/child", [1], token=None, headers={"auth": f"Bearer {token}"})[0] == 200
    assert _get(f"{stream}/child", token=token)[0] == 200
    status, _, body, _ = _get(stream, token=token)
    assert status == 403 and set(body) == {"error"}
    status, _, body, _ = _get(stream, token=None)
    assert status == 401 and set(body) == {"error"}


def test_long_poll_gets_new_records_and_delete_releases_waiting_readers(stream):
    _post(stream, [0])
    results: dict[str, object] = {}

    def wait(key, query):
        started = time.monotonic()
        results[key] = (_get(stream, query)[2], time.monotonic() - started)

    reader = threading.Thread(target=wait, args=("new", "timeout_sec=10"))
    reader.start()
    time.sleep(0.4)
    _post(stream, ["fresh"])
    reader.join(15)
    body, waited = results["new"]
    assert [r["data"] for r in body["records"]] == ["fresh"] and waited < 5

    reader = threading.Thread(target=wait, args=("deleted", "timeout_sec=15"))
    reader.start()
    time.sleep(0.4)
    _call("DELETE", f"/streams/{stream}")
    reader.join(20)
    body, waited = results["deleted"]
    assert body == {"records": []} and waited < 5
