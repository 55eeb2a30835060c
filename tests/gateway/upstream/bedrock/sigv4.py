"""The fake Bedrock's check of a request's SigV4 signature, by botocore: the canonical request, the string to
sign and the signature recomputed from the headers the request says it signed, with its own X-Amz-Date, the
secret the fake knows for its access key id, and the scope's region and service. A request signed with another
secret, or changed after signing (a signed header, the path, the query, the body), does not verify."""

from __future__ import annotations

import hmac
import re

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/"
                            r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
                            r"Signature=(?P<signature>[0-9a-f]{64})$")


def problem(method: str, raw_path: str, query: str, headers: dict[str, str], body: bytes,
            credentials: dict[str, tuple[str, str | None]], region: str, service: str = "bedrock") -> str | None:
    """Why the request's signature does not verify, or None when it does. `headers`: lower-case names."""
    found = _AUTHORIZATION.match(headers.get("authorization", ""))
    if found is None:
        return "no SigV4 Authorization header"
    if found["key"] not in credentials:
        return f"unknown access key id {found['key']}"
    if (found["region"], found["service"]) != (region, service):
        return f"signed for {found['region']}/{found['service']}, not {region}/{service}"
    names = found["signed"].split(";")
    if not {"host", "x-amz-date"} <= set(names) or any(name not in headers for name in names):
        return f"signed headers {names} incomplete or missing"
    secret, token = credentials[found["key"]]
    if token is not None and headers.get("x-amz-security-token") != token:
        return "the session token is missing or another"
    if headers["x-amz-date"][:8] != found["day"]:
        return "X-Amz-Date is not the scope's day"
    url = f"http://{headers['host']}{raw_path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, headers={name: headers[name] for name in names}, data=body)
    request.context["timestamp"] = headers["x-amz-date"]
    signer = SigV4Auth(Credentials(found["key"], secret, token), service, region)
    if signer.signed_headers(signer.headers_to_sign(request)) != found["signed"]:
        return "the signed header list is not the request's"
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, found["signature"]):
        return "the signature does not match"
    return None


def signed_names(headers: dict[str, str]) -> list[str] | None:
    found = _AUTHORIZATION.match(headers.get("authorization", ""))
    return found["signed"].split(";") if found else None
