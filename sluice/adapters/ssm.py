"""The SSM mirror of each queue's document (settings + shard map): one parameter per queue, or a few.

Size: a Standard value holds 4,096 bytes, an Advanced one 8,192. A document over 4,096 bytes is split:
the queue's parameter then holds a small header (`{"~parts": n, "tag": t}`) and the document is in
parameters `<name>.0` … `<name>.<n-1>` (queue names have no '.', so no queue's parameter is ever one of
them), each value its part prefixed with the tag (a digest of the whole document). Parts are written
first, the header last; a reader that finds a part with another tag raced a writer and reads again.
Every value is Standard: no Advanced charges, and one read of up to 10 parts is one GetParameters call
(GetParameter, GetParameters and GetParametersByPath share 40 transactions per second per account and
region by default, so reads are counted).

Tiers: AWS never lets an Advanced parameter go back to Standard (PutParameter answers
ValidationException; only delete + create would), and an older version wrote documents over 4 KB as
Advanced. So a write that AWS refuses as Standard with a ValidationException is repeated as Advanced
and this container remembers it. We do not rely on `Intelligent-Tiering`: AWS documents it as choosing
the tier when a parameter is created, and reports (terraform-provider-aws#18521, aws-sdk-net#3157) show
it refusing values over 4 KB.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from sluice.adapters import aws

STANDARD_MAX_BYTES = 4096
ADVANCED_MAX_BYTES = 8192
TAG_CHARS = 8
PART_BYTES = STANDARD_MAX_BYTES - TAG_CHARS
GET_PARAMETERS_MAX = 10  # names per GetParameters call
_HEADER = '{"~parts":'
_READ_ATTEMPTS = 3


def tier_for(document_bytes: int, *, known_advanced: bool) -> str:
    """The tier to send: Advanced when the document needs it or the parameter already is Advanced."""
    return "Advanced" if known_advanced or document_bytes > STANDARD_MAX_BYTES else "Standard"


def split(document: str, limit: int = PART_BYTES) -> list[str]:
    """`document` in consecutive pieces of at most `limit` UTF-8 bytes (never inside a character)."""
    parts: list[str] = []
    start = size = 0
    for index, ch in enumerate(document):
        width = len(ch.encode())
        if size + width > limit:
            parts.append(document[start:index])
            start, size = index, 0
        size += width
    parts.append(document[start:])
    return parts


def tag_of(document: str) -> str:
    return hashlib.blake2b(document.encode(), digest_size=TAG_CHARS // 2).hexdigest()


class SsmMirror:
    def __init__(self, prefix: str, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.prefix = prefix.rstrip("/")
        self._endpoint_url = endpoint_url
        self.region = region  # None: the process's own region
        self._advanced: set[str] = set()  # parameters this container has seen become Advanced

    @property
    def _client(self) -> Any:
        return aws.client("ssm", self._endpoint_url, self.region)

    @property
    def _fast_client(self) -> Any:
        """Reads and one-value writes fail fast (no retry): the mirror is a cache of the control item. A
        container that cannot read it reads the control item instead; a write SSM throttles is repaired
        by the coordinator (PutParameter has a small quota of its own), not retried for seconds of
        backoff."""
        return aws.client("ssm", self._endpoint_url, self.region, fail_fast=True)

    def name(self, queue: str) -> str:
        return f"{self.prefix}/{queue}"

    @staticmethod
    def part_name(name: str, index: int) -> str:
        return f"{name}.{index}"

    def read(self, queue: str) -> str | None:
        """The document, or None when there is none (or a writer kept changing it while we read)."""
        name = self.name(queue)
        for _ in range(_READ_ATTEMPTS):
            value = self._get(name)
            if value is None or not value.startswith(_HEADER):
                return value
            header = json.loads(value)
            names = [self.part_name(name, i) for i in range(header["~parts"])]
            values = self._get_many(names)
            pieces = [values.get(n) for n in names]
            if all(p is not None and p[:TAG_CHARS] == header["tag"] for p in pieces):
                return "".join(p[TAG_CHARS:] for p in pieces if p is not None)
        return None

    def write(self, queue: str, document: str) -> None:
        name = self.name(queue)
        if len(document.encode()) <= STANDARD_MAX_BYTES:
            self._put(name, document, self._fast_client)
            return
        # Several puts against PutParameter's 3 a second: these retry (with the SDK's backoff), or a
        # large map would never be written whole.
        tag, parts = tag_of(document), split(document)
        for index, part in enumerate(parts):
            self._put(self.part_name(name, index), tag + part, self._client)
        self._put(name, json.dumps({"~parts": len(parts), "tag": tag}, separators=(",", ":")), self._client)

    def delete(self, queue: str) -> None:
        """The queue's parameter and its parts, if any (gone already is fine)."""
        name = self.name(queue)
        value = self._get(name)
        names = [name]
        if value is not None and value.startswith(_HEADER):
            names += [self.part_name(name, i) for i in range(json.loads(value)["~parts"])]
        self.delete_names(names)

    def delete_names(self, names: list[str]) -> None:
        for start in range(0, len(names), GET_PARAMETERS_MAX):
            with aws.translated("SSM"):
                self._client.delete_parameters(Names=names[start : start + GET_PARAMETERS_MAX])
        self._advanced.difference_update(names)

    def listing(self) -> Iterator[tuple[str, str]]:
        """(name, value) of every parameter under the prefix: queues' documents, headers and parts."""
        kwargs: dict[str, Any] = {"Path": self.prefix, "Recursive": False, "MaxResults": GET_PARAMETERS_MAX}
        while True:
            with aws.translated("SSM"):
                page = self._client.get_parameters_by_path(**kwargs)
            for param in page.get("Parameters", []):
                yield param["Name"], param["Value"]
            if not page.get("NextToken"):
                return
            kwargs["NextToken"] = page["NextToken"]

    def queue_of(self, name: str) -> str | None:
        """The queue whose document (or part of it) parameter `name` holds."""
        if not name.startswith(self.prefix + "/"):
            return None
        return name[len(self.prefix) + 1 :].split(".", 1)[0] or None

    def _get(self, name: str) -> str | None:
        try:
            with aws.translated("SSM"):
                resp = self._fast_client.get_parameter(Name=name)
        except ClientError as exc:
            if aws.error_code(exc) == "ParameterNotFound":
                return None
            raise
        value: str = resp["Parameter"]["Value"]
        return value

    def _get_many(self, names: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(names), GET_PARAMETERS_MAX):
            with aws.translated("SSM"):
                resp = self._fast_client.get_parameters(Names=names[start : start + GET_PARAMETERS_MAX])
            found.update({p["Name"]: p["Value"] for p in resp.get("Parameters", [])})
        return found

    def _put(self, name: str, value: str, client: Any) -> None:
        tier = tier_for(len(value.encode()), known_advanced=name in self._advanced)
        try:
            self._put_tier(name, value, tier, client)
        except ClientError as exc:
            if tier != "Standard" or aws.error_code(exc) != "ValidationException":
                raise
            self._put_tier(name, value, "Advanced", client)  # Advanced already: AWS refuses the downgrade

    def _put_tier(self, name: str, value: str, tier: str, client: Any) -> None:
        with aws.translated("SSM"):
            client.put_parameter(Name=name, Value=value, Type="String", Overwrite=True, Tier=tier)
        if tier == "Advanced":
            self._advanced.add(name)
