"""Who a Bedrock server's requests are signed as, and the signature itself, both by botocore as AWS's own
SDKs do: the model calls (gateway/upstream/providers/bedrock/) and model discovery (`bedrock_listing`)
share it, so it lives below both.

Credentials: the server's own access key pair (and session token) when the operator gave one, else AWS's
standard credential chain of the serving process (environment, shared config and profile, web identity,
container and instance roles), resolved once per process and kept: botocore refreshes temporary ones
before they expire. Resolving or refreshing may read files or ask a metadata service, so `needs_io`
tells an event loop when to do it in a thread; when it says no, `frozen` answers from memory.

Signing is SigV4 (`botocore.auth.SigV4Auth`) of the request as it will be sent: the headers given (and
Host) are signed; the ones added after (User-Agent, Content-Length, Accept-Encoding) are sent unsigned,
as boto3 does with its own."""

from __future__ import annotations

import threading
import time

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.session import Session

from gateway.registry.snapshot import Cloud
from gateway.state import per_process

CHAIN_RETRY_SECONDS = 60.0  # a chain that found nothing is asked again after this long, not on every call


class _Chain:
    """The process's credentials from AWS's chain: resolved at the first call that needs them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.credentials: Credentials | None = None
        self.resolved_at: float | None = None

    def forget(self) -> None:
        with self.lock:
            self.credentials, self.resolved_at = None, None

    def stale(self) -> bool:
        return self.resolved_at is None or (self.credentials is None
                                            and time.monotonic() - self.resolved_at > CHAIN_RETRY_SECONDS)

    def get(self) -> Credentials | None:
        with self.lock:
            if self.stale():
                self.credentials = Session().get_credentials()
                self.resolved_at = time.monotonic()
            return self.credentials


_chain = _Chain()
per_process.register("aws-credentials", reset=_chain.forget)


def uses_chain(cloud: Cloud) -> bool:
    return not (cloud.aws_access_key_id and cloud.aws_secret_access_key)


def needs_io(cloud: Cloud) -> bool:
    """Whether `frozen(cloud)` may block: the chain not resolved yet, or its credentials due for a refresh."""
    if not uses_chain(cloud):
        return False
    if _chain.stale():
        return True
    refresh_needed = getattr(_chain.credentials, "refresh_needed", None)
    return bool(refresh_needed and refresh_needed())


def frozen(cloud: Cloud) -> ReadOnlyCredentials | None:
    """The credentials to sign with now (None: the chain found none)."""
    if not uses_chain(cloud):
        return ReadOnlyCredentials(cloud.aws_access_key_id, cloud.aws_secret_access_key,
                                   cloud.aws_session_token or None)
    credentials = _chain.get()
    return credentials.get_frozen_credentials() if credentials is not None else None


def signed_headers(credentials: ReadOnlyCredentials, *, service: str, region: str, method: str, url: str,
                   headers: dict[str, str], body: bytes) -> dict[str, str]:
    """`headers` with the signature's own added (X-Amz-Date, X-Amz-Security-Token with a session token,
    Authorization): every one of `headers`, and the URL's host, is signed."""
    request = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    SigV4Auth(credentials, service, region).add_auth(request)
    return {name: value.decode() if isinstance(value, bytes) else value for name, value in request.headers.items()}


def secrets(cloud: Cloud) -> list[str]:
    """What an error text must never show of a server's AWS credentials."""
    return [value for value in (cloud.aws_secret_access_key, cloud.aws_session_token) if value]
