"""The SSM mirror of each queue's document (settings + shard map), one parameter per queue.

Tiers: a document over 4 KB needs the Advanced tier, and AWS never lets an Advanced parameter go back
to Standard (PutParameter answers ValidationException; only delete + create would). So a parameter
once Advanced stays Advanced: small documents are sent as Standard until AWS refuses that with a
ValidationException, then the write is repeated as Advanced and this container remembers it. We do
not rely on `Intelligent-Tiering`: AWS documents it as choosing the tier when a parameter is created,
and reports (terraform-provider-aws#18521, aws-sdk-net#3157) show it refusing values over 4 KB.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from sluice.adapters import aws

STANDARD_MAX_BYTES = 4096


def tier_for(document_bytes: int, *, known_advanced: bool) -> str:
    """The tier to send: Advanced when the document needs it or the parameter already is Advanced."""
    return "Advanced" if known_advanced or document_bytes > STANDARD_MAX_BYTES else "Standard"


class SsmMirror:
    def __init__(self, prefix: str, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.prefix = prefix.rstrip("/")
        self._endpoint_url = endpoint_url
        self.region = region  # None: the process's own region
        self._advanced: set[str] = set()  # parameters this container has seen become Advanced

    def name(self, queue: str) -> str:
        return f"{self.prefix}/{queue}"

    def read(self, queue: str) -> str | None:
        try:
            with aws.translated("SSM"):
                resp = aws.client("ssm", self._endpoint_url, self.region).get_parameter(Name=self.name(queue))
        except ClientError as exc:
            if aws.error_code(exc) == "ParameterNotFound":
                return None
            raise
        return resp["Parameter"]["Value"]

    def write(self, queue: str, document: str) -> None:
        name = self.name(queue)
        tier = tier_for(len(document.encode()), known_advanced=name in self._advanced)
        try:
            self._put(name, document, tier)
        except ClientError as exc:
            if tier != "Standard" or aws.error_code(exc) != "ValidationException":
                raise
            self._put(name, document, "Advanced")  # it is Advanced already: AWS refuses the downgrade

    def _put(self, name: str, document: str, tier: str) -> None:
        with aws.translated("SSM"):
            aws.client("ssm", self._endpoint_url, self.region).put_parameter(
                Name=name, Value=document, Type="String", Overwrite=True, Tier=tier
            )
        if tier == "Advanced":
            self._advanced.add(name)

    def delete(self, queue: str) -> None:
        try:
            with aws.translated("SSM"):
                aws.client("ssm", self._endpoint_url, self.region).delete_parameter(Name=self.name(queue))
            self._advanced.discard(self.name(queue))
        except ClientError as exc:
            if aws.error_code(exc) != "ParameterNotFound":
                raise
