"""S3 objects: overflow bodies too large for a DynamoDB item, and stream segments."""

from __future__ import annotations

from collections.abc import Iterator

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

    def put(self, key: str, data: bytes) -> None:
        with aws.translated("S3"):
            self._client.put_object(Bucket=self.name, Key=key, Body=data)

    def get(self, key: str) -> bytes | None:
        try:
            with aws.translated("S3"):
                return self._client.get_object(Bucket=self.name, Key=key)["Body"].read()
        except ClientError as exc:
            if aws.error_code(exc) in {"NoSuchKey", "404"}:
                return None
            raise

    def delete(self, key: str) -> None:
        with aws.translated("S3"):
            self._client.delete_object(Bucket=self.name, Key=key)

    def keys(self, prefix: str) -> Iterator[str]:
        paginator = self._client.get_paginator("list_objects_v2")
        with aws.translated("S3"):
            for page in paginator.paginate(Bucket=self.name, Prefix=prefix):
                for obj in page.get("Contents", []):
                    yield obj["Key"]
