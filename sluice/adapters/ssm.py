"""The SSM mirror of each queue's document (settings + shard map), one parameter per queue."""

from __future__ import annotations

from botocore.exceptions import ClientError

from sluice.adapters import aws


class SsmMirror:
    def __init__(self, prefix: str, endpoint_url: str | None = None) -> None:
        self.prefix = prefix.rstrip("/")
        self._endpoint_url = endpoint_url

    def name(self, queue: str) -> str:
        return f"{self.prefix}/{queue}"

    def read(self, queue: str) -> str | None:
        try:
            with aws.translated("SSM"):
                resp = aws.client("ssm", self._endpoint_url).get_parameter(Name=self.name(queue))
        except ClientError as exc:
            if aws.error_code(exc) == "ParameterNotFound":
                return None
            raise
        return resp["Parameter"]["Value"]

    def write(self, queue: str, document: str) -> None:
        tier = "Standard" if len(document.encode()) <= 4096 else "Advanced"
        with aws.translated("SSM"):
            aws.client("ssm", self._endpoint_url).put_parameter(
                Name=self.name(queue), Value=document, Type="String", Overwrite=True, Tier=tier
            )

    def delete(self, queue: str) -> None:
        try:
            with aws.translated("SSM"):
                aws.client("ssm", self._endpoint_url).delete_parameter(Name=self.name(queue))
        except ClientError as exc:
            if aws.error_code(exc) != "ParameterNotFound":
                raise
