"""`Idempotency-Key` on the POSTs that cost or create (docs/decisions/0113-idempotency-key.md): the
first answer to a request sent with a key is kept per account for IDEMPOTENCY_TTL_SECONDS, and the same key
with the same request gets that answer again, marked `Idempotent-Replayed: true`, instead of a second call:
no model is called and nothing is metered again.

The endpoint wrapper (accounts/endpoints.py, `idempotent=True`) comes here only for a request that carries
the header, after its credential and request ceiling (a replay is counted and carries the rate headers):

- `claim_then(prepare)`, the endpoint's `prepare` step for such a request: the key's form (400 on /v1, 422
  on /api), the request's fingerprint (method, path and query, body; a multipart form by its fields and
  files, since an SDK's retry draws a new boundary) and one insert that claims the key
  (gateway.models.IdempotentRequest, unique per account and key). A key already claimed answers at once:
  its stored answer (a replay: `prepare` and the view are skipped, so a replay is given even once the
  quota is spent), 422 when it was sent with another request, 409 with Retry-After while the first is
  still being answered. An expired row, or a claim whose process died (held past
  IDEMPOTENCY_HOLD_SECONDS), is taken over.
- `answered_once` (`answered_once_sync` for a sync view): the view's answer, then the claim settled. A
  whole answer (2xx, 4xx) is stored; a failure a retry could cure (5xx, 429) and a stream release the key.
  An async view with a key runs to its end even when its client leaves: its answer is stored and its
  after-send step (the usage metering) runs, so the client's retry gets it and the call is metered once.
  A client that leaves before the view started (`admitted_once`) has its claim released once it is made.

A request without the header pays one look-up in `request.META`. With it, the database work runs in the
request's thread for a sync view, in worker hops (gateway/state/workers.py) for an async one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone

from gateway.models import IdempotentRequest
from gateway.state.workers import in_worker
from gateway.telemetry.logjson import current
from gateway.web.body import read_body
from gateway.web.errors import ApiError, ValidationFailed, render_error
from gateway.web.paths import COMPAT_SURFACES, surface_of

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
META_KEY = "HTTP_IDEMPOTENCY_KEY"  # the header's name in request.META
REPLAYED = "Idempotent-Replayed"
KEY_FORM = re.compile(r"[\x20-\x7e]{1,255}")  # printable ASCII
KEPT_HEADERS = ("X-Inference-Request-Id",)  # with X-Request-Id, which the middleware writes (spec 7.4)
RETRY_AFTER_SECONDS = 1


@dataclass
class Once:
    """A request's hold on its key (`token`), or, for a replay, the stored first answer (`stored`)."""

    row_id: int
    token: str
    stored: IdempotentRequest | None = None

    def replay(self, request: HttpRequest) -> HttpResponse:
        """The first answer again, with its identifying headers. Its X-Request-Id too, unless the client
        sent an id of its own on the retry, which is returned unchanged (spec 7.4)."""
        row = self.stored
        response = HttpResponse(bytes(row.body), status=row.status, content_type=row.content_type or None)
        for name in KEPT_HEADERS:
            if name in row.headers:
                response[name] = row.headers[name]
        first_id = row.headers.get("X-Request-Id")
        if first_id and request.META.get("HTTP_X_REQUEST_ID") != request.request_id:
            request.request_id = first_id  # written by gateway/web/middleware.py, as the log line's id
            if (exchange := current.get()) is not None:
                exchange.request_id = first_id
        response[REPLAYED] = "true"
        return response

    def settle(self, request: HttpRequest, response: HttpResponse) -> None:
        """Keep a whole answer, or release the key (a 5xx, a 429, a stream). Never raises: the answer goes
        out either way. One that cannot be kept releases the key; with the database away, the claim ends
        when it is no longer held."""
        status = response.status_code
        if response.streaming or status >= 500 or status == 429:
            self.release()
            return
        try:
            headers = {"X-Request-Id": request.request_id,
                       **{name: response[name] for name in KEPT_HEADERS if name in response}}
            IdempotentRequest.objects.filter(pk=self.row_id, claim=self.token).update(
                status=status, content_type=response.get("Content-Type", ""), headers=headers,
                body=response.content, held_until=None)
        except Exception:
            logger.exception("the answer to Idempotency-Key row %s was not kept", self.row_id)
            self.release()

    def release(self) -> None:
        """Let the key go: the next request with it runs anew. Never raises (see `settle`)."""
        try:
            IdempotentRequest.objects.filter(pk=self.row_id, claim=self.token).delete()
        except Exception:
            logger.exception("Idempotency-Key row %s was not released", self.row_id)


def claim_then(prepare: Callable[[HttpRequest], object] | None) -> Callable[[HttpRequest], object]:
    """The `prepare` step of a request with a key: claim it (`request.once`), then `prepare`, unless the
    claim is a replay. A refusal of `prepare` is an answer like any other, kept or not by its status."""

    def step(request: HttpRequest) -> object:
        once = request.once = claim(request)
        if once.stored is not None or prepare is None:
            return None
        try:
            return prepare(request)
        except ApiError as exc:
            once.settle(request, render_error(request, exc))
            raise
        except BaseException:
            once.release()
            raise

    return step


def claim(request: HttpRequest) -> Once:
    """Claim the request's key for its account, or find the answer it already has (see the module)."""
    key = request.META[META_KEY]
    if not KEY_FORM.fullmatch(key):
        raise _invalid(request)
    account_id = request.principal.account.pk
    fingerprint = request_fingerprint(request)
    for _attempt in range(3):
        now = timezone.now()
        token = uuid.uuid4().hex
        fresh = {"fingerprint": fingerprint, "claim": token, "status": None, "content_type": "", "headers": {},
                 "body": b"", "created_at": now,
                 "expires_at": now + timedelta(seconds=settings.IDEMPOTENCY_TTL_SECONDS),
                 "held_until": now + timedelta(seconds=settings.IDEMPOTENCY_HOLD_SECONDS)}
        # INSERT ... ON CONFLICT DO NOTHING, then the row read back: the same two statements whether the key
        # is new or taken (an INSERT refused by the unique constraint costs an exception, a transaction and a
        # rollback: a replay took 1.7 ms of gateway CPU that way, bench/README.md)
        IdempotentRequest.objects.bulk_create([IdempotentRequest(account_id=account_id, key=key, **fresh)],
                                              ignore_conflicts=True)
        row = IdempotentRequest.objects.filter(account_id=account_id, key=key).first()
        if row is None:
            continue  # released or swept meanwhile
        if row.claim == token:
            return Once(row.pk, token)
        if row.expires_at <= now or (row.status is None and (row.held_until or now) <= now):
            if IdempotentRequest.objects.filter(pk=row.pk, claim=row.claim).update(**fresh):
                return Once(row.pk, token)
            continue  # another retry took it over first
        if row.fingerprint != fingerprint:
            raise _reused()
        if row.status is None:
            raise _in_flight()
        return Once(row.pk, row.claim, stored=row)
    raise _in_flight()  # the key kept changing hands: others are answering it


def request_fingerprint(request: HttpRequest) -> str:
    """SHA-256 of the method, the path with its query string and the body; a multipart form by its fields
    and files, not its bytes (the boundary is drawn anew for each try)."""
    digest = hashlib.sha256(f"{request.method} {request.get_full_path()}\n".encode())
    if request.content_type == "multipart/form-data":
        _digest_form(digest, request)
    else:
        digest.update(read_body(request))
    return digest.hexdigest()


def _digest_form(digest, request: HttpRequest) -> None:
    try:
        fields, files = request.POST, request.FILES
    except (MultiPartParserError, SuspiciousOperation):
        digest.update(b"a malformed form")  # refused by the view, and that refusal kept
        return
    for name in sorted(fields):
        digest.update(json.dumps(["field", name, fields.getlist(name)]).encode() + b"\n")
    for name in sorted(files):
        for upload in files.getlist(name):
            digest.update(json.dumps(["file", name, upload.name, upload.content_type, upload.size]).encode() + b"\n")
            for chunk in upload.chunks():
                digest.update(chunk)
            upload.seek(0)  # the view reads it again


async def admitted_once(request: HttpRequest, admission: Awaitable[dict[str, str]]) -> dict[str, str]:
    """The endpoint's checks of a request with a key (`admission`, which claims it), carried to their end
    when the client leaves meanwhile (the claim is made in a worker thread, which a cancel does not stop):
    a claim they made is then released, since the view never ran and the retry must run it."""
    task = asyncio.ensure_future(admission)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        _keep(_release_when_done(request, task))
        raise


async def _release_when_done(request: HttpRequest, task: asyncio.Future) -> None:
    try:
        await task
    except BaseException:
        return  # refused: `claim_then` kept or released its claim already
    once: Once | None = getattr(request, "once", None)
    if once is not None and once.stored is None:
        await in_worker(once.release)()


async def answered_once(request: HttpRequest, answer: Callable[[], Awaitable[HttpResponse]]) -> HttpResponse:
    """The stored answer, or the view's (`answer`), settled; carried to its end if the client leaves."""
    once: Once = request.once
    if once.stored is not None:
        return once.replay(request)
    task = asyncio.ensure_future(_settled(request, once, answer))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:  # the client went away: its retry will get the answer
        _close_when_done(task)
        raise


def answered_once_sync(request: HttpRequest, answer: Callable[[], HttpResponse]) -> HttpResponse:
    once: Once = request.once
    if once.stored is not None:
        return once.replay(request)
    try:
        try:
            response = answer()
        except ApiError as exc:
            response = render_error(request, exc)
    except BaseException:
        once.release()
        raise
    once.settle(request, response)
    return response


async def _settled(request: HttpRequest, once: Once, answer: Callable[[], Awaitable[HttpResponse]]) -> HttpResponse:
    try:
        try:
            response = await answer()
        except ApiError as exc:
            response = render_error(request, exc)
    except BaseException:
        await in_worker(once.release)()
        raise
    await in_worker(once.settle)(request, response)
    return response


_UNHEARD: set[asyncio.Future] = set()  # steps finished for clients that left (a reference each)


def _close_when_done(task: asyncio.Future) -> None:
    """The answer nobody will send is closed when it is ready, as the handler would have closed it after
    sending: so its after-send step (gateway/calls/metering.py AfterSendResponse) meters the call."""

    async def close() -> None:
        try:
            response = await task
        except BaseException:
            return
        try:
            if (in_loop := getattr(response, "after_send_in_loop", None)) is not None:
                await in_loop()
            await in_worker(response.close)()
        except Exception:
            logger.exception("the answer to a client that left was not closed")

    _keep(close())


def _keep(step: Awaitable[None]) -> None:
    """Run `step` on its own, referenced until it ends (a task nobody holds may be collected midway)."""
    task = asyncio.ensure_future(step)
    _UNHEARD.add(task)
    task.add_done_callback(_UNHEARD.discard)


def _invalid(request: HttpRequest) -> ApiError:
    message = f"The {HEADER} header must be 1 to 255 printable ASCII characters."
    if surface_of(request.path) in COMPAT_SURFACES:
        return ApiError(400, message, code="invalid_idempotency_key", param=HEADER)
    return ValidationFailed({HEADER: [message]}, message)


def _reused() -> ApiError:
    message = (f"This {HEADER} was sent before with another request (method, path or body); "
               "a new request needs a new key.")
    error = ValidationFailed({HEADER: [message]}, message)
    error.code, error.param = "idempotency_key_reused", HEADER
    return error


def _in_flight() -> ApiError:
    return ApiError(409, f"A request with this {HEADER} is still being answered; retry in {RETRY_AFTER_SECONDS} "
                    "second.", code="idempotency_key_in_use", param=HEADER,
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def idempotency_sweep(*, batch: int = 5000) -> int:
    """Delete the expired rows, `batch` at a time; how many went. Until then the claim counts them absent."""
    now = timezone.now()
    deleted = 0
    expired = IdempotentRequest.objects.filter(expires_at__lte=now)
    while ids := list(expired.values_list("pk", flat=True)[:batch]):
        deleted += IdempotentRequest.objects.filter(pk__in=ids).delete()[0]
    return deleted
