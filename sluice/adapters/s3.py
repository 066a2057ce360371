"""S3 objects: overflow bodies too large for a DynamoDB item, payload-tier objects, and stream segments."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

from botocore.exceptions import ClientError

from sluice.adapters import aws


class Bucket:
    def __init__(self, name: str, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.name = name
        self._endpoint_url = endpoint_url
        self.region = region  # None: the process's own region

    @property
    def _client(self):
        return aws.client("s3", self._endpoint_url, self.region)

    def put(self, key: str, data: bytes, *, tags: dict[str, str] | None = None) -> None:
        """`tags` select lifecycle rules (the payload tier's expiry)."""
        extra = {"Tagging": urlencode(tags)} if tags else {}
        with aws.translated("S3"):
            self._client.put_object(Bucket=self.name, Key=key, Body=data, **extra)

    def get(self, key: str) -> bytes | None:
        try:
            with aws.translated("S3"):
                return self._client.get_object(Bucket=self.name, Key=key)["Body"].read()
        except ClientError as exc:
            if aws.error_code(exc) in {"NoSuchKey", "404"}:
                return None
            raise

    def get_range(self, key: str, start: int, end: int) -> bytes | None:
        """Bytes [start, end) of an object (a ranged GET), or None if there is no such object."""
        if end <= start:
            return b""
        try:
            with aws.translated("S3"):
                got = self._client.get_object(Bucket=self.name, Key=key, Range=f"bytes={start}-{end - 1}")
                return got["Body"].read()
        except ClientError as exc:
            if aws.error_code(exc) in {"NoSuchKey", "404"}:
                return None
            raise

    def delete_many(self, keys: list[str]) -> None:
        """One DeleteObjects request per 1,000 keys (deletes are free; a missing key is not an error)."""
        for lo in range(0, len(keys), 1000):
            objects = [{"Key": k} for k in keys[lo : lo + 1000]]
            with aws.translated("S3"):
                self._client.delete_objects(Bucket=self.name, Delete={"Objects": objects, "Quiet": True})

    def delete(self, key: str) -> None:
        with aws.translated("S3"):
            self._client.delete_object(Bucket=self.name, Key=key)

    def keys(self, prefix: str, start_after: str = "") -> Iterator[str]:
        """Keys under `prefix` in lexicographic order, those after `start_after` only."""
        paginator = self._client.get_paginator("list_objects_v2")
        with aws.translated("S3"):
            for page in paginator.paginate(Bucket=self.name, Prefix=prefix, StartAfter=start_after):
                for obj in page.get("Contents", []):
                    yield obj["Key"]
