"""SigV4 on the SQS face, verified with botocore's own signer (`botocore.auth.SigV4Auth`): the request is
rebuilt from the API Gateway event with the headers the client signed, the canonical request and the
string to sign are computed by botocore exactly as the client computed them, and the signature is
compared in constant time. The secret is the access key's derived secret (sluice/engine/accesskeys.py).
"""

from __future__ import annotations

import hmac
import re
from datetime import UTC, datetime

from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lambdas.faces.sqs.errors import SqsError
from sluice.engine.accesskeys import AccessKeys
from sluice.engine.auth import Principal

MAX_SKEW_SECONDS = 15 * 60  # AWS refuses a request dated further than this from its clock
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+)\s*,\s*SignedHeaders=(?P<signed>[^,\s]+)\s*,"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})\s*$"
)


def verify(
    keys: AccessKeys,
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: dict[str, str],
    body: bytes,
    now: datetime | None = None,
) -> tuple[str, Principal]:
    """(access key id, principal) of a correctly signed request, or SQS's error for what is wrong."""
    authorization = headers.get("authorization")
    if not authorization:
        raise SqsError("MissingAuthenticationToken", "Request is missing Authentication Token")
    found = _AUTH.match(authorization.strip())
    if found is None:
        raise SqsError("IncompleteSignature", "The request signature does not conform to AWS SigV4")
    parts = found["credential"].split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise SqsError("IncompleteSignature", "the Credential of the Authorization header is malformed")
    access_key_id, day, region, service, _ = parts
    stamp = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(stamp, SIGV4_TIMESTAMP).replace(tzinfo=UTC)
    except ValueError:
        raise SqsError("IncompleteSignature", "X-Amz-Date is missing or not in ISO 8601 basic form") from None
    if not stamp.startswith(day):
        raise SqsError("SignatureDoesNotMatch", "the credential scope's date is not X-Amz-Date's")
    moment = now or datetime.now(UTC)
    if abs((moment - signed_at).total_seconds()) > MAX_SKEW_SECONDS:
        raise SqsError(
            "RequestExpired",
            f"Request has expired: X-Amz-Date {stamp} is more than 15 minutes from the server's time",
        )
    principal = keys.principal(access_key_id)
    if principal is None:
        raise SqsError("InvalidClientTokenId", "The security token included in the request is invalid.")
    if principal.expired(int(moment.timestamp() * 1000)):  # its token was minted with a lifetime
        raise SqsError("ExpiredToken", "The security token included in the request is expired.")
    signed = found["signed"].split(";")
    if "host" not in signed or any(name not in headers for name in signed):
        raise SqsError("SignatureDoesNotMatch", "a signed header is missing from the request")
    url = f"http://{headers['host']}{raw_path}" + (f"?{raw_query}" if raw_query else "")
    request = AWSRequest(method=method, url=url, headers={n: headers[n] for n in signed}, data=body)
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(access_key_id, keys.secret(access_key_id)), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, found["signature"]):
        raise SqsError(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. Check your "
            "AWS Secret Access Key and signing method.",
        )
    return access_key_id, principal
