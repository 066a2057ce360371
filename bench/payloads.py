"""Message bodies for the cost bench: random text (the worst case for compression) and JSON events
(order and click events of 200 B to 2 KB, what queues mostly carry). Both deterministic from a seed, so
two runs price the same bytes."""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass
from typing import Any

EVENT_MIN_BYTES, EVENT_MAX_BYTES = 200, 2048

_PAGES = ("/", "/search", "/cart", "/checkout", "/account", "/products", "/deals", "/help")
_REFERRERS = ("https://www.google.com/", "https://t.co/", "direct", "https://news.example.org/", "email")
_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 Version/18.1 Safari/605.1.15",
)
_PRODUCTS = ("Trail shoe", "Rain jacket", "Wool socks", "Water bottle", "Head lamp", "Day pack", "Tent")
_CITIES = (("Lyon", "FR"), ("Austin", "US"), ("Osaka", "JP"), ("Leeds", "GB"), ("Porto", "PT"))
_STATUSES = ("created", "paid", "packed", "shipped")


@dataclass(frozen=True)
class Payload:
    """A body generator: `bodies(n)` gives `n` (body, content_type) pairs, deterministic per seed."""

    name: str
    label: str
    size: int  # random text: exact size; events: the upper bound

    def bodies(self, count: int, seed: int) -> list[tuple[Any, str]]:
        rng = random.Random(f"{self.name}-{self.size}-{seed}")
        if self.name == "random":
            return [(random_text(self.size, rng), "text") for _ in range(count)]
        return [(json_event(rng), "json") for _ in range(count)]


def random_text(size: int, rng: random.Random) -> str:
    """Text of exactly `size` bytes that zlib cannot shrink much (base64 of random bytes), different
    for every message so a batch does not compress better than real traffic would."""
    return base64.b64encode(rng.randbytes(size * 3 // 4 + 3)).decode()[:size]


def json_event(rng: random.Random) -> dict[str, Any]:
    """A click (about a third) or an order event, EVENT_MIN_BYTES..EVENT_MAX_BYTES of compact JSON:
    the shapes and value spread of e-commerce tracking, ids and numbers random."""
    target = rng.randint(EVENT_MIN_BYTES, EVENT_MAX_BYTES)
    event = _click(rng) if rng.random() < 0.35 else _order(rng)
    key = "props" if event["type"] == "click" else "items"
    while _size(event) < target:
        grown = {**event, key: [*event[key], _extra(rng, key)]}
        if _size(grown) > EVENT_MAX_BYTES:
            break
        event = grown
    return event


def _size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, separators=(",", ":")).encode())


def _hex(rng: random.Random, n: int) -> str:
    return rng.randbytes(n).hex()


def _click(rng: random.Random) -> dict[str, Any]:
    return {
        "type": "click",
        "event_id": _hex(rng, 16),
        "ts": 1_763_800_000_000 + rng.randrange(86_400_000),
        "user_id": f"u-{rng.randrange(10**7):07d}",
        "session_id": _hex(rng, 8),
        "page": rng.choice(_PAGES),
        "referrer": rng.choice(_REFERRERS),
        "user_agent": rng.choice(_AGENTS),
        "props": [],
    }


def _order(rng: random.Random) -> dict[str, Any]:
    city, country = rng.choice(_CITIES)
    return {
        "type": "order",
        "order_id": f"ord-{rng.randrange(10**9):09d}",
        "ts": 1_763_800_000_000 + rng.randrange(86_400_000),
        "status": rng.choice(_STATUSES),
        "customer": {"id": f"c-{rng.randrange(10**6):06d}", "tier": rng.choice(("std", "plus"))},
        "ship_to": {"city": city, "country": country, "postcode": f"{rng.randrange(10**5):05d}"},
        "currency": "EUR" if country in ("FR", "PT") else "USD",
        "items": [],
    }


def _extra(rng: random.Random, key: str) -> dict[str, Any]:
    if key == "props":
        return {"name": rng.choice(("x", "y", "scroll", "dwell_ms")), "value": rng.randrange(10_000)}
    return {
        "sku": f"SKU-{rng.randrange(10**6):06d}",
        "name": rng.choice(_PRODUCTS),
        "qty": rng.randint(1, 4),
        "unit_price": round(rng.uniform(3, 250), 2),
    }


RANDOM_200 = Payload("random", "random text 200 B", 200)
RANDOM_10K = Payload("random", "random text 10 KB", 10 * 1024)
RANDOM_64K = Payload("random", "random text 64 KB", 64 * 1024)
RANDOM_128K = Payload("random", "random text 128 KB", 128 * 1024)  # Cloudflare Queues' largest message
_EVENTS_LABEL = f"JSON events {EVENT_MIN_BYTES} B to {EVENT_MAX_BYTES // 1024} KB"
EVENTS = Payload("events", _EVENTS_LABEL, EVENT_MAX_BYTES)
