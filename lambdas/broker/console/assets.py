"""The console's files, answered as API Gateway proxy responses with the security headers.

The files are read once per container, from `static/` beside this module (the Lambda asset carries
them: tests/infra/test_asset.py). Only the files in that folder are served, by exact name (no path is
ever joined from the request), with a strong ETag so a browser revalidates instead of downloading again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

STATIC = Path(__file__).with_name("static")
INDEX = "index.html"  # served at /console only: its relative links resolve against that path
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# The page loads nothing from anywhere else and talks only to its own origin (the API); it cannot be
# framed, and no inline script or style runs (a message body rendered by mistake as markup stays inert).
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    "Strict-Transport-Security": "max-age=31536000",
}


@dataclass(frozen=True)
class Asset:
    body: str
    content_type: str
    etag: str


@cache
def assets() -> dict[str, Asset]:
    """Every servable file by name (the index under its own name), read once per container."""
    found = {}
    for path in sorted(STATIC.iterdir()):
        content_type = TYPES.get(path.suffix)
        if content_type and path.is_file():
            body = path.read_text(encoding="utf-8")
            etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
            found[path.name] = Asset(body, content_type, etag)
    return found


def respond(event: dict[str, Any]) -> dict[str, Any]:
    """`GET /console` (the page) or `GET /console/{asset}` (a module or the stylesheet)."""
    name = (event.get("pathParameters") or {}).get("asset")
    asset = assets().get(name or INDEX) if name != INDEX else None
    if asset is None:
        return _answer(404, "text/plain; charset=utf-8", f"no console file named {name!r}\n")
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    if asset.etag in (headers.get("if-none-match") or "").split(", "):
        return _answer(304, asset.content_type, "", asset.etag)
    return _answer(200, asset.content_type, asset.body, asset.etag)


def _answer(status: int, content_type: str, body: str, etag: str | None = None) -> dict[str, Any]:
    headers = {**SECURITY_HEADERS, "Content-Type": content_type, "Cache-Control": "no-cache"}
    if etag:
        headers["ETag"] = etag
    return {"statusCode": status, "headers": headers, "body": body, "isBase64Encoded": False}
