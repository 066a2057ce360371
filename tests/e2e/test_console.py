"""The console (`/console`) in headless Chromium (Debian's `chromium`, driven by Playwright) against
`sluice local`: every page exercised as a user would, each scanned by axe-core, bad input answered
with the API's own text, the errors a user can act on shown as messages, and the main pages
photographed (into docs/img with SLUICE_CONSOLE_SCREENSHOTS=docs/img: `make console-screenshots`)."""

from __future__ import annotations

import json
import math
import os
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect, sync_playwright

from sluice.client import SluiceApiError, SluiceClient
from tests.e2e.conftest import LocalServer, start_local_server, stop_local_server

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"  # Debian's package (`make install`); Playwright's own download is not used
# As root on a machine without a display or outside network: no sandbox, no GPU, no background calls.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS_ENV = "SLUICE_CONSOLE_SCREENSHOTS"
HOME, AWAY = "us-east-1", "eu-west-1"
expect.set_options(timeout=15_000)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A server of the console tests' own (its queue list is what these tests made, nothing else), over
    two regions, so shards show their regions and one region can be taken down; the console talks to
    the home region's API."""
    local = start_local_server("--regions", f"{HOME},{AWAY}", "--inter-region-delay-ms", "10")
    yield local
    stop_local_server(local)


@pytest.fixture(scope="module")
def client(server: LocalServer) -> SluiceClient:
    return server.client()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Chromium is missing: `make install` installs Debian's chromium package"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get(SCREENSHOTS_ENV)
    return Path(folder) if folder else tmp_path_factory.mktemp("console-screenshots")


class Console:
    """One browser tab on the console; fails the test on any uncaught script error."""

    def __init__(self, page: Page, url: str, shots: Path) -> None:
        self.page = page
        self.url = url
        self.shots = shots
        self.script_errors: list[str] = []
        page.on("pageerror", lambda error: self.script_errors.append(str(error)))

    def open(self, fragment: str) -> None:
        self.page.goto(f"{self.url}/console{fragment}")

    def sign_in(self, token: str) -> None:
        self.open("#/signin")
        self.page.get_by_label("Sluice token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.page.get_by_role("heading", name="Queues", exact=True)).to_be_visible()

    def sign_out(self) -> None:
        self.page.get_by_role("button", name="Sign out").click()
        expect(self.page.get_by_role("heading", name="Sign in to Sluice")).to_be_visible()

    def heading(self, text: str) -> None:
        expect(self.page.get_by_role("heading", level=1)).to_contain_text(text)

    def confirm(self, verb: str) -> None:
        dialog = self.page.get_by_role("dialog")
        expect(dialog).to_be_visible()
        dialog.get_by_role("button", name=verb, exact=True).click()
        expect(dialog).to_have_count(0)

    def alert(self) -> str:
        alert = self.page.locator("#alert")
        expect(alert).not_to_be_empty()
        return alert.inner_text()

    def accessible(self) -> None:
        """axe-core (WCAG 2.x A/AA rules and best practices) finds nothing on the page as it is now."""
        results = Axe().run(self.page)
        found = [
            f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
            for v in results.response["violations"]
        ]
        assert not found, found

    def shot(self, name: str) -> None:
        path = self.shots / f"console-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000


@pytest.fixture
def console(browser: Browser, server: LocalServer, shots: Path) -> Iterator[Console]:
    """A fresh tab (its own sessionStorage), signed in with the admin token."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    tab = Console(context.new_page(), server.url, shots)
    tab.sign_in(server.token)
    yield tab
    context.close()
    assert not tab.script_errors


def api_error(url: str, method: str, path: str, body: object, token: str) -> tuple[int, str]:
    """(status, message) the API answers to a request, to compare with what the console shows."""
    request = urllib.request.Request(
        f"{url}{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["errors"][0]["message"]
    raise AssertionError(f"{method} {path} succeeded")


def pull_status(client: SluiceClient, queue: str, wanted: int) -> int:
    """The status of pulls from `queue` once it is `wanted`, or the last one after 15 s (the handlers
    cache a queue's document for `shard_map_ttl_seconds`, 5 s, so a pause reaches pulls within that)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            client.pull(queue, visibility_timeout_ms=1)
            status = 200
        except SluiceApiError as exc:
            status = exc.status
        if status == wanted or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


def test_console_files_are_served_with_security_headers(server: LocalServer) -> None:
    with urllib.request.urlopen(f"{server.url}/console", timeout=10) as response:
        page = response.read().decode()
        headers = response.headers
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    csp = headers["Content-Security-Policy"]
    for directive in (
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ):
        assert directive in csp
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "no-referrer"
    # Everything the page loads is one of its own files: no CDN, nothing from another origin.
    assert set(re.findall(r'(?:src|href)="([^"#]+)"', page)) == {
        "console/console.css",
        "console/app.js",
        "data:,",
    }
    cached = urllib.request.Request(f"{server.url}/console", headers={"If-None-Match": headers["ETag"]})
    with pytest.raises(urllib.error.HTTPError) as not_modified:
        urllib.request.urlopen(cached, timeout=10)
    assert not_modified.value.code == 304
    for name, kind in (
        ("app.js", "text/javascript"),
        ("queue.js", "text/javascript"),
        ("console.css", "text/css"),
    ):
        with urllib.request.urlopen(f"{server.url}/console/{name}", timeout=10) as response:
            assert response.headers["Content-Type"].startswith(kind)
            assert "Content-Security-Policy" in response.headers
    for missing in ("index.html", "nothing.js", "..%2Fassets.py"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{server.url}/console/{missing}", timeout=10)
        assert refused.value.code == 404, missing


def test_sign_in_keeps_the_token_in_this_tab_only(browser: Browser, server: LocalServer, shots: Path) -> None:
    context = browser.new_context()
    tab = Console(context.new_page(), server.url, shots)
    tab.open("")
    expect(tab.page.get_by_role("heading", name="Sign in to Sluice")).to_be_visible()
    tab.accessible()
    tab.page.get_by_label("Sluice token").fill("not-a-token")
    tab.page.get_by_role("button", name="Sign in").click()
    expect(tab.page.get_by_role("alert").filter(has_text="unknown or revoked token")).to_be_visible()
    tab.page.get_by_label("Sluice token").fill(server.token)
    tab.page.get_by_label("Sluice token").press("Enter")  # the keyboard signs in too
    expect(tab.page.get_by_role("heading", name="Queues", exact=True)).to_be_visible()
    stored = tab.page.evaluate("() => ({session: {...sessionStorage}, local: {...localStorage}})")
    assert server.token in stored["session"].values()
    assert stored["local"] == {} and context.cookies() == []
    other_tab = Console(context.new_page(), server.url, shots)  # sessionStorage is per tab
    other_tab.open("#/queues")
    expect(other_tab.page.get_by_role("heading", name="Sign in to Sluice")).to_be_visible()
    context.close()
    assert not tab.script_errors and not other_tab.script_errors


def test_queues_page_creates_a_queue_and_its_backlog_chart_moves(
    console: Console, client: SluiceClient, server: LocalServer
) -> None:
    page = console.page
    bad = "bad name!"
    status, message = api_error(server.url, "POST", "/v1/queues", {"queue_name": bad}, server.token)
    page.get_by_label("Name", exact=True).fill(bad)
    page.get_by_role("button", name="Create queue").click()
    expect(page.get_by_role("alert").filter(has_text=message)).to_be_visible()  # the API's own sentence
    assert status == 400 and bad not in [q["queue_name"] for q in client.list_queues()]

    name = unique("orders")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Dead letter queue (optional)").fill(f"{name}-dlq")
    page.get_by_role("button", name="Create queue").click()
    expect(page.get_by_role("link", name=name, exact=True)).to_have_count(2)  # the notice and the list
    assert client.get_queue(name)["settings"]["dead_letter_queue"] == f"{name}-dlq"

    page.get_by_label("Refresh every").select_option("1000")
    line = page.locator(f'polyline[data-queue="{name}"]')
    expect(line).to_have_attribute("data-latest", "0")
    for total in (4, 9, 15):
        client.send_batch(
            name, [{"body": {"n": n}} for n in range(total - client.metrics(name)["backlog_count"])]
        )
        expect(line).to_have_attribute("data-latest", str(total))
    samples = int(line.get_attribute("data-samples") or 0)
    expect(line).not_to_have_attribute("data-samples", str(samples))  # it keeps sampling on its own
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True))
    expect(row.get_by_role("cell").nth(0)).to_have_text("15")  # backlog (the row header is the name)
    console.accessible()
    console.shot("queues")


def test_queue_page_sends_peeks_and_edits_settings(
    console: Console, client: SluiceClient, server: LocalServer
) -> None:
    page = console.page
    name = unique("payments")
    client.create_queue(name)
    client.create_group(name, "analytics")
    console.open(f"#/queues/{name}")
    console.heading(name)

    page.get_by_label("Body").fill('{"order": 7, "total": 12.5}')
    page.get_by_role("button", name="Send", exact=True).click()
    expect(
        page.locator("main").get_by_text(re.compile(r"Sent message \w+ at offset \d{32}\."))
    ).to_be_visible()
    expect(page.locator("#figure-backlog")).to_have_text("1")

    page.get_by_role("button", name="Peek", exact=True).click()
    peeked = page.get_by_role("table").filter(has_text=f"Peeked in {name} (1)")
    expect(peeked).to_contain_text('{"order":7,"total":12.5}')
    assert client.metrics(name)["in_flight"] == 0  # a peek leases nothing

    groups = page.get_by_role("table").filter(has_text="Consumer groups")
    expect(groups.get_by_role("row").filter(has_text="analytics")).to_contain_text("1")
    shards = page.get_by_role("table").filter(has_text="Shards:")
    expect(shards.get_by_role("row").nth(1)).to_contain_text("open")

    page.get_by_label("Max retries").fill("7")
    page.get_by_label("Ordered").check()
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("main").get_by_text("Saved: max_retries, ordered.")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_contain_text("ordered")
    assert {"max_retries": 7, "ordered": True}.items() <= client.get_queue(name)["settings"].items()

    big = "x" * 140_000  # over the default max_message_bytes (131072)
    oversized = {"messages": [{"body": big, "content_type": "text"}]}
    status, message = api_error(server.url, "POST", f"/v1/queues/{name}/messages", oversized, server.token)
    page.get_by_label("Content type").select_option("text")
    page.get_by_label("Body").fill(big)
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.get_by_role("alert").filter(has_text=message)).to_be_visible()
    assert status == 413 and client.metrics(name)["backlog_count"] == 1  # refused: nothing stored

    status, message = api_error(
        server.url, "PATCH", f"/v1/queues/{name}", {"settings": {"visibility_timeout_ms": 0}}, server.token
    )
    page.get_by_label("Visibility timeout (ms)").fill("0")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("alert").filter(has_text=message)).to_be_visible()
    assert status == 400 and client.get_queue(name)["settings"]["visibility_timeout_ms"] == 30000


def test_a_dead_letter_is_peeked_and_redriven(console: Console, client: SluiceClient) -> None:
    page = console.page
    name, dlq = unique("jobs"), unique("jobs-dlq")
    client.create_queue(name, dead_letter_queue=dlq, max_retries=1)
    client.send(name, {"job": 0})
    deadline = time.monotonic() + 30
    while client.metrics(dlq)["backlog_count"] < 1:  # a consumer that fails job 0 until it is dead
        assert time.monotonic() < deadline, "the message was not dead-lettered"
        pulled = client.pull(name, batch_size=1, visibility_timeout_ms=60_000)
        client.retry(name, [m.lease_id for m in pulled.messages])
    client.send_batch(name, [{"body": {"job": n}} for n in (1, 2)])
    dead = client.peek(dlq)[0]

    console.open(f"#/queues/{name}")
    console.heading(name)
    expect(page.locator("#dlq-backlog")).to_have_text(f"1 dead letter(s) waiting in {dlq}.")
    page.get_by_role("button", name="Peek dead letters").click()
    expect(page.get_by_role("table").filter(has_text=f"Peeked in {dlq} (1)")).to_contain_text(
        json.dumps(dead["body"], separators=(",", ":"))
    )
    console.accessible()
    console.shot("queue")
    page.get_by_role("button", name="Redrive to this queue").click()
    console.confirm("Redrive")
    expect(
        page.locator("main").get_by_text(f"Moved 1 message(s) from {dlq} to {name}; 0 remain.")
    ).to_be_visible()
    expect(page.locator("#dlq-backlog")).to_have_text(f"0 dead letter(s) waiting in {dlq}.")
    assert client.metrics(dlq)["backlog_count"] == 0 and client.metrics(name)["backlog_count"] == 3


def test_pause_resume_and_purge_ask_first_and_work_by_keyboard(
    console: Console, client: SluiceClient
) -> None:
    page = console.page
    name = unique("events")
    client.create_queue(name)
    client.send_batch(name, [{"body": n} for n in range(4)])
    console.open(f"#/queues/{name}")
    console.heading(name)

    pause = page.get_by_role("button", name="Pause", exact=True)
    pause.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(f"Pause {name}?")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    console.accessible()  # with the dialog open
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(pause).to_be_focused()  # focus returns to what opened the dialog
    assert client.get_queue(name)["paused"] is False  # cancelled: nothing changed

    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # from Cancel to the confirming button
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("paused")
    assert client.get_queue(name)["paused"] is True
    assert pull_status(client, name, 409) == 409  # once the consumers' cached queue document has lapsed

    page.get_by_role("button", name="Resume", exact=True).click()
    console.confirm("Resume")
    expect(page.get_by_role("heading", level=1)).not_to_contain_text("paused")
    assert pull_status(client, name, 200) == 200

    page.get_by_role("button", name="Purge", exact=True).click()
    console.confirm("Purge")
    expect(page.locator("main").get_by_text(re.compile(r"^Purged [12] shard\(s\)\.$"))).to_be_visible()
    expect(page.locator("#figure-backlog")).to_have_text("0")
    assert client.metrics(name)["backlog_count"] == 0

    page.get_by_role("button", name="Delete queue").click()
    console.confirm("Delete queue")
    console.heading("Queues")
    expect(page.get_by_role("link", name=name, exact=True)).to_have_count(0)
    with pytest.raises(SluiceApiError) as deleted:
        client.get_queue(name)
    assert deleted.value.status == 404


def test_the_keyboard_reaches_everything_from_the_top(console: Console) -> None:
    page = console.page
    page.reload()  # a fresh load: focus at the top of the page
    console.heading("Queues")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Refresh every")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")  # back up into the header: Sign out, then Tokens
    expect(page.get_by_role("link", name="Tokens")).to_be_focused()
    page.keyboard.press("Enter")
    console.heading("Tokens")
    expect(page.get_by_role("heading", level=1)).to_be_focused()  # focus follows the page change


def test_the_stream_tail_shows_offsets_and_resumes_from_an_offset_or_a_time(
    console: Console, client: SluiceClient
) -> None:
    page = console.page
    name = unique("clicks")
    client.create_queue(name)
    first = client.send_batch(name, [{"body": {"click": n}} for n in range(3)])["offsets"]
    console.open(f"#/queues/{name}")
    page.get_by_role("link", name="Tail the stream").click()
    console.heading(f"Stream {name}")

    rows = page.locator("table tbody tr")
    page.get_by_label("Start from").select_option("beginning")
    page.get_by_role("button", name="Start tail").click()
    expect(rows).to_have_count(3)
    expect(rows.locator("th")).to_have_text(first)  # every record's offset
    resume = page.locator("#next-offset")  # two regions, a shard in each: a cursor over both
    expect(resume).to_have_text(re.compile(r"^~"))
    live = client.send(name, {"click": 3})["offsets"][0]  # arrives while the tail waits
    expect(rows).to_have_count(4)
    expect(rows.nth(3).locator("th")).to_have_text(live)
    console.accessible()
    console.shot("stream")

    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_label("Offset (after this one)")).to_have_value(resume.inner_text())  # where to resume
    now = time.time()  # the next records come after a whole second that no earlier record reached
    between = math.floor(now) + 1
    time.sleep(between - now + 0.02)
    later = client.send_batch(name, [{"body": {"click": n}} for n in (4, 5)])["offsets"]
    page.get_by_role("button", name="Start tail").click()  # from the offset the tail stopped at
    expect(rows).to_have_count(2)
    expect(rows.locator("th")).to_have_text(later)

    page.get_by_role("button", name="Stop").click()
    page.get_by_label("Start from").select_option("time")
    page.get_by_label("Time (UTC)").fill(datetime.fromtimestamp(between, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Start tail").click()
    expect(rows).to_have_count(2)
    expect(rows.locator("th")).to_have_text(later)

    page.get_by_role("button", name="Stop").click()
    page.get_by_label("Start from").select_option("offset")
    page.get_by_label("Offset (after this one)").fill("not-an-offset")
    page.get_by_role("button", name="Start tail").click()
    expect(page.locator("p.error")).to_contain_text("offset")  # the API's refusal, in its words


def test_a_scoped_token_sees_one_queue_only(console: Console, client: SluiceClient) -> None:
    page = console.page
    mine, foreign = unique("mine"), unique("foreign")
    client.create_queue(mine)
    client.create_queue(foreign)
    console.open("#/tokens")
    console.heading("Tokens")
    page.get_by_label("Queue", exact=True).fill(mine)
    page.get_by_label("write").check()
    page.get_by_role("button", name="Mint token").click()
    secret = page.locator("#minted-token")
    expect(secret).to_have_text(re.compile(r"^sluice_\S{20,}$"))
    token = secret.inner_text()
    expect(page.get_by_role("row").filter(has_text=mine)).to_contain_text("read, write")
    console.accessible()
    console.shot("tokens")
    page.reload()  # shown once: it is nowhere on the page again
    console.heading("Tokens")
    expect(page.locator("main").get_by_text(token)).to_have_count(0)

    console.sign_out()
    console.sign_in(token)
    listed = page.get_by_role("table").filter(has_text="Queues (")
    expect(listed.get_by_role("link", name=mine, exact=True)).to_be_visible()
    expect(listed.locator("tbody tr")).to_have_count(1)
    console.open(f"#/queues/{foreign}")
    text = console.alert()
    assert "This token is not allowed to do that" in text and "lacks the 'read' scope" in text
    expect(page.locator("main")).not_to_contain_text(foreign)  # nothing of the foreign queue is shown
    console.open("#/tokens")
    assert "lacks the 'admin' scope" in console.alert()
    console.accessible()
    console.open(f"#/queues/{mine}")
    console.heading(mine)


def test_an_expired_token_is_told_to_sign_in_again(console: Console, client: SluiceClient) -> None:
    page = console.page
    name = unique("brief")
    client.create_queue(name)
    console.open("#/tokens")
    page.get_by_label("Queue", exact=True).fill(name)
    page.get_by_label("Expires after (s, optional)").fill("3")
    page.get_by_role("button", name="Mint token").click()
    token = page.locator("#minted-token").inner_text()
    minted_at = time.monotonic()
    console.sign_out()
    console.sign_in(token)
    time.sleep(max(0.0, 3.2 - (time.monotonic() - minted_at)))
    page.get_by_role("link", name=name, exact=True).click()
    text = console.alert()
    assert "The API did not accept this token: token expired at" in text and "mint a new one" in text
    page.get_by_role("button", name="Sign in again").click()
    expect(page.get_by_role("heading", name="Sign in to Sluice")).to_be_visible()


def test_a_region_down_shows_a_message_and_the_console_recovers(
    console: Console, client: SluiceClient
) -> None:
    page = console.page
    name = unique("global")
    client.create_queue(name)
    client.send_batch(name, [{"body": n} for n in range(3)])
    console.open("#/queues")
    page.get_by_label("Refresh every").select_option("1000")
    expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()

    client.request("POST", f"/_local/regions/{AWAY}/down")
    skipped = f"Region {AWAY} cannot be reached: these figures count the regions that answered."
    try:
        # The figures come from the region that answers, and the page says which region they leave out.
        expect(page.get_by_role("status").filter(has_text=skipped)).to_be_visible(timeout=15_000)
        expect(page.locator("#alert")).to_be_empty()
        page.get_by_role("link", name=name, exact=True).click()
        console.heading(name)
        expect(page.get_by_role("status").filter(has_text=skipped)).to_be_visible()
        shards = page.get_by_role("table").filter(has_text="Shards:")
        expect(shards.get_by_role("row").filter(has_text=AWAY).first).to_contain_text("unreachable")
        console.accessible()
    finally:
        client.request("POST", f"/_local/regions/{AWAY}/up")
    expect(page.get_by_role("status").filter(has_text=skipped)).to_have_count(0, timeout=20_000)
    expect(page.locator("#alert")).to_be_empty()
    expect(page.get_by_role("table").filter(has_text="Shards:")).to_contain_text(AWAY)
