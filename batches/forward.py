"""A batch forwarded to a cloud's own batch API instead of being run line by line on the gateway's workers,
where the operator chose it (`ModelServer.forward_batches`, docs/batches.md "Forwarding to a cloud's batch
API"); the APIs, by kind of server, are batches/cloud_apis.py's.

- `launch`, where a batch is about to run (validated, or made with its lines): it goes to the cloud when the
  first model of every line's chain is on one server that forwards batches and speaks the batch's format (an
  OpenAI batch of chat completions or embeddings to an OpenAI-compatible server, an Anthropic batch to an
  Anthropic one or, of Claude models, to an AWS Bedrock or a Google Vertex AI one), the account's group has
  no guardrails (they screen each call here; the cloud would pass them by) and no quota or budget of the
  account is reached. Each request's `model` becomes the server's own
  name of it. While it is being sent the batch is held as a worker holds it (`runner`, `runner_until`), so
  neither the sweep nor a worker runs it meanwhile; sent, it has `forwarded_to` and `upstream_id`, its lines
  are `running` with the claim UPSTREAM, and its first poll is queued. Anything else (the server unreachable,
  a 4xx or 5xx, a malformed answer) and it runs here as any batch, the reason logged.
- `poll` reads it at the cloud every BATCH_FORWARD_POLL_SECONDS until it ends there, then fills each line
  still waiting by its `custom_id` (a request the cloud gave nothing for is errored, saying so), each answered
  one metered once under its line's key at the batch price as a call of the batch (a row of the calls log
  tagged with it), its body's `model` the public id again. A line is filled by a conditional update of a line
  still waiting, after its metering: a poll run again after the end (its worker restarted) finds nothing to
  fill, and one killed between the two meters the line again under the same key, one record. A cloud that
  failed the whole batch (OpenAI's `failed`, before any request ran) or no longer knows it: it runs here.
- `cancel_upstream` asks the cloud to cancel (batches/finish.py `cancel`); a poll of a cancelling batch asks
  again while the cloud still runs it.

Between polls `runner_until` is when the next is due, so a second chain of polls (the sweep's, for a batch
whose poll was lost) finds it not due and stops."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from batches import cloud_apis, clouds
from batches import metrics as batch_metrics
from batches.checks import capability_of
from batches.models import Batch, BatchLine
from batches.queue import POLL, RUN, enqueue
from gateway.calls.metering import BatchUse, meter
from gateway.limits.quotas import quota_check
from gateway.models import ModelServer
from gateway.registry.routing import plan_chain, resolve
from gateway.registry.snapshot import Pool, Target, registry, server_of
from gateway.upstream.providers.base import UpstreamError
from gateway.usage.call_log import SURFACES, own_call
from gateway.web.errors import ApiError, outage_of
from routines.durable import durably

log = logging.getLogger(__name__)

Status, Line = Batch.Status, BatchLine.Status
UPSTREAM = "upstream"  # the claim of a line its cloud runs
# the endpoints of a batch that may go to a cloud, by the batch's kind, and the kind of server that takes them
# (an OpenAI batch of /v1/responses stays here: its responses are kept by the gateway for later calls)
ENDPOINTS = {Batch.Kind.OPENAI: ("/v1/chat/completions", "/v1/embeddings"), Batch.Kind.ANTHROPIC: ("/v1/messages",)}
DUE_SLACK_SECONDS = 2.0  # a poll this early is the one that was due
CHUNK = 500  # lines filled per transaction


def destination(batch: Batch, lines: list[BatchLine]) -> dict[str, Target] | None:
    """The target of each model the lines name, when the batch may go to their server's batch API (see the
    module's docstring); None when it runs here."""
    if batch.endpoint not in ENDPOINTS.get(batch.kind, ()) or not lines:
        return None
    group = batch.account.group
    if getattr(group, "guardrails", None):
        return None
    targets: dict[str, Target] = {}
    for line in lines:
        model = line.body.get("model") if isinstance(line.body, dict) else None
        if not isinstance(model, str):
            return None
        if model in targets:
            continue
        try:
            chain = plan_chain(model, group=group, capability=capability_of(batch.endpoint))
        except ApiError:
            return None
        if not chain:
            return None
        targets[model] = chain[0]
    servers = {target.server.id for target in targets.values()}
    if len(servers) != 1:
        return None
    # read from its row (the registry's server carries what a call needs): a batch is launched once
    row = ModelServer.objects.filter(pk=servers.pop(), forward_batches=True).first()
    return targets if row is not None and api_for(row.kind, batch.kind) is not None else None


def api_for(server_kind: str, batch_kind: str):
    """The batch API of a kind of server, when it takes batches of this kind's format; else None."""
    api = cloud_apis.APIS.get(server_kind)
    return api if api is not None and api.FORMAT == batch_kind else None


def launch(batch: Batch, lines: list[BatchLine]) -> bool:
    """Send the batch to its cloud when it may go there, else queue its run here (see the module's docstring);
    True when the cloud took it. Makes network calls: called outside a transaction (from the event loop,
    through gateway/state/workers.py `in_worker`)."""
    batch = Batch.objects.select_related("account", "account__group").get(pk=batch.pk)
    targets = destination(batch, lines) if batch.status == Status.IN_PROGRESS else None
    if targets is None or not _quota_left(batch):
        enqueue(RUN, batch.pk)
        return False
    server = next(iter(targets.values())).server
    token = uuid.uuid4().hex
    hold = settings.BATCH_LEASE_SECONDS + 2 * (server.connect_timeout + server.read_timeout)
    if not _hold(batch.pk, token, hold):
        return False  # a worker of ours runs it already
    requests = [(line.custom_id, {**line.body, "model": targets[line.body["model"]].name}) for line in lines]
    api = api_for(server.kind, batch.kind)
    try:
        upstream_id = asyncio.run(api.submit(next(iter(targets.values())), name=batch.pk, endpoint=batch.endpoint,
                                             requests=requests))
    except (UpstreamError, ValueError) as exc:
        log.warning("batch %s: not forwarded to server %s (%s); it runs on the gateway's workers", batch.pk,
                    server.name, exc)
        _run_here(batch.pk, token)
        return False
    moved = durably(lambda: _forwarded(batch.pk, token, server.id, upstream_id),
                    what=f"batch {batch.pk}: forwarded to {server.name}")
    if not moved:  # cancelled while it was being sent: cancelled there, and ended here by a run
        log.info("batch %s: cancelled while it was forwarded to server %s as %s", batch.pk, server.name,
                 upstream_id)
        _ask_cancel(api, next(iter(targets.values())), batch.pk, upstream_id)
        _run_here(batch.pk, token)
        return False
    log.info("batch %s: forwarded to server %s as %s", batch.pk, server.name, upstream_id)
    return True


def _quota_left(batch: Batch) -> bool:
    """Whether the account may spend now: a batch held by a quota or a budget waits here, as its runner holds
    it (batches/runner.py), rather than all of it being sent to the cloud at once."""
    try:
        quota_check(account=batch.account)
    except ApiError:
        return False
    except Exception as exc:
        if outage_of(exc) is None:
            raise
        return False
    return True


def _hold(batch_id: str, token: str, seconds: float) -> bool:
    now = timezone.now()
    lapsed = Q(runner_until__isnull=True) | Q(runner_until__lt=now)
    return bool(Batch.objects.filter(lapsed, pk=batch_id, status=Status.IN_PROGRESS, upstream_id="").update(
        runner=token, runner_until=now + timedelta(seconds=seconds)))


def _run_here(batch_id: str, token: str) -> None:
    durably(lambda: Batch.objects.filter(pk=batch_id, runner=token).update(runner="", runner_until=None),
            what=f"batch {batch_id}: given back")
    enqueue(RUN, batch_id)


def _forwarded(batch_id: str, token: str, server_id: int, upstream_id: str) -> bool:
    due = timezone.now() + timedelta(seconds=settings.BATCH_FORWARD_POLL_SECONDS)
    moved = Batch.objects.filter(pk=batch_id, runner=token, status=Status.IN_PROGRESS).update(
        forwarded_to_id=server_id, upstream_id=upstream_id, runner="", runner_until=due)
    if moved:
        BatchLine.objects.filter(batch_id=batch_id, status=Line.QUEUED).update(status=Line.RUNNING, claim=UPSTREAM)
        enqueue(POLL, batch_id, countdown=settings.BATCH_FORWARD_POLL_SECONDS)
    return bool(moved)


def _server_target(row: ModelServer) -> Target:
    """The server alone, as the providers' plain requests take it (they read only its server)."""
    return Target(0, row.name, "", server_of(row), frozenset(), (), 0)


def _ask_cancel(api, target: Target, batch_id: str, upstream_id: str) -> bool:
    try:
        asyncio.run(api.cancel(target, upstream_id))
    except (UpstreamError, ValueError) as exc:
        log.warning("batch %s: its cancel was not taken by server %s (%s); asked again at its next poll",
                    batch_id, target.server.name, exc)
        return False
    return True


def cancel_upstream(batch: Batch) -> bool:
    """Ask the cloud to cancel the forwarded batch (its poll then sees it end, cancelled). Makes a network call,
    as `launch` does; a cloud that did not take it is asked again by the next poll."""
    if not batch.upstream_id or batch.forwarded_to is None:
        return False
    api = api_for(batch.forwarded_to.kind, batch.kind)
    return api is not None and _ask_cancel(api, _server_target(batch.forwarded_to), batch.pk, batch.upstream_id)


# ----------------------------------------------------------------------------------------------- polling

HELD, WAITING, LOCAL = "held", "waiting", "local"


def _take(batch_id: str, token: str) -> bool:
    """A forwarded batch whose poll is due (or whose poller died) is held by this one."""
    now = timezone.now()
    due = (Q(runner_until__isnull=True) | Q(runner_until__lt=now)
           | Q(runner="", runner_until__lte=now + timedelta(seconds=DUE_SLACK_SECONDS)))
    return bool(Batch.objects.filter(due, pk=batch_id, status__in=(Status.IN_PROGRESS, Status.CANCELLING))
                .exclude(upstream_id="").update(runner=token, runner_until=now + timedelta(
                    seconds=settings.BATCH_LEASE_SECONDS)))


def _again(batch_id: str, token: str) -> None:
    due = timezone.now() + timedelta(seconds=settings.BATCH_FORWARD_POLL_SECONDS)
    durably(lambda: Batch.objects.filter(pk=batch_id, runner=token).update(runner="", runner_until=due),
            what=f"batch {batch_id}: its next poll")
    enqueue(POLL, batch_id, countdown=settings.BATCH_FORWARD_POLL_SECONDS)


def poll(batch_id: str) -> str:
    """Read the forwarded batch at its cloud once: WAITING (read again later), HELD (another poll has it, or
    it is not forwarded), LOCAL (it runs here now) or, ended there and its lines filled, the status it ends
    as (completed, cancelled or expired) for batches/finish.py `finalize`."""
    token = uuid.uuid4().hex
    if not _take(batch_id, token):
        return HELD
    batch = Batch.objects.select_related("account", "account__group", "forwarded_to").get(pk=batch_id)
    if batch.forwarded_to is None:
        return _back_here(batch, token, "its server was deleted")
    api, target = api_for(batch.forwarded_to.kind, batch.kind), _server_target(batch.forwarded_to)
    if api is None:
        return _back_here(batch, token, "its server's kind no longer has that batch API")
    try:
        state = asyncio.run(api.read(target, batch.upstream_id))
        if batch.status == Status.CANCELLING and state.running:
            _ask_cancel(api, target, batch_id, batch.upstream_id)
        if state.failed:
            return _back_here(batch, token, f"the cloud failed it: {state.failed}")
        if not state.ended:
            _again(batch_id, token)
            return WAITING
        results = asyncio.run(api.results(target, state))
    except (UpstreamError, ValueError) as exc:
        if isinstance(exc, UpstreamError) and not exc.retryable:
            return _back_here(batch, token, f"the cloud no longer answers for it: {exc}")
        log.warning("batch %s: server %s could not be read (%s); read again later", batch_id, target.server.name,
                    exc)
        _again(batch_id, token)
        return WAITING
    _fill(batch, results, token)
    durably(lambda: Batch.objects.filter(pk=batch_id, runner=token).update(runner="", runner_until=None),
            what=f"batch {batch_id}: polled")
    return Status.CANCELLED if batch.status == Status.CANCELLING else state.end_as


def _back_here(batch: Batch, token: str, why: str) -> str:
    """The cloud will not run it: its lines not yet answered run here, as any batch's."""
    log.warning("batch %s: forwarded to server %s as %s, it runs on the gateway's workers now: %s", batch.pk,
                batch.forwarded_to.name if batch.forwarded_to else "(deleted)", batch.upstream_id, why)

    def back() -> None:
        BatchLine.objects.filter(batch_id=batch.pk, status=Line.RUNNING, claim=UPSTREAM).update(
            status=Line.QUEUED, claim="")
        Batch.objects.filter(pk=batch.pk, runner=token).update(upstream_id="", forwarded_to=None, runner="",
                                                               runner_until=None)

    durably(back, what=f"batch {batch.pk}: back to the gateway's workers")
    enqueue(RUN, batch.pk)
    return LOCAL


def _fill(batch: Batch, results: dict[str, clouds.Result], token: str) -> None:
    """Each line still waiting: metered (an answered one), then its end saved while it still waits."""
    targets: dict[str, Target | None] = {}
    surface = SURFACES.get(batch.endpoint.lstrip("/"), batch.endpoint)
    waiting = list(BatchLine.objects.filter(batch_id=batch.pk, status=Line.RUNNING, claim=UPSTREAM)
                   .order_by("index").values_list("pk", flat=True))
    for start in range(0, len(waiting), CHUNK):  # read a chunk, then written: no cursor left open over writes
        lines = BatchLine.objects.filter(pk__in=waiting[start:start + CHUNK]).order_by("index")
        _save(batch.pk, [_end_of(batch, line, results, targets, surface) for line in lines], token)


def _end_of(batch: Batch, line: BatchLine, results: dict[str, clouds.Result], targets: dict[str, Target | None],
            surface: str) -> tuple[BatchLine, clouds.Result, str]:
    """The line's end as its cloud gave it, its call metered when it ran there."""
    model = str(line.body.get("model", "")) if isinstance(line.body, dict) else ""
    if model not in targets:
        targets[model] = _target_on(model, batch.forwarded_to_id)
    result = results.get(line.custom_id)
    if result is None:  # the cloud left it out: errored, saying so (nothing ran that we know of)
        return line, clouds.Result(Line.ERRORED, 502, _missing_body(batch)), ""
    if result.status_code is None:  # cancelled or expired there: it did not run
        return line, result, ""
    if result.status == Line.SUCCEEDED and isinstance(result.body, dict) and targets[model] is not None:
        result = clouds.Result(result.status, result.status_code, {**result.body, "model": targets[model].public_id})
    request_id = uuid.uuid4().hex
    _meter(batch, line, result, targets[model], model, surface, request_id)
    return line, result, request_id


def _missing_body(batch: Batch) -> dict[str, Any]:
    message = "The cloud's batch API returned no result for this request."
    if batch.kind == Batch.Kind.ANTHROPIC:
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "param": None, "code": "upstream_no_result"}}


def _target_on(model: str, server_id: int | None) -> Target | None:
    """The model's target on the server the batch went to, as the registry holds it now (its price)."""
    try:
        found = resolve(model, registry())
    except ApiError:
        return None
    candidates = [d.target for d in found.deployments] if isinstance(found, Pool) else [found]
    return next((t for t in candidates if t.server.id == server_id), None)


def _meter(batch: Batch, line: BatchLine, result: clouds.Result, target: Target | None, model: str, surface: str,
           request_id: str) -> None:
    """The line's call, once: its row of the calls log (tagged with the batch) and its usage under its key."""
    public = target.public_id if target is not None else model
    if target is None:
        log.warning("batch %s: model %s is no longer on the server the batch went to; line %s metered at no "
                    "price", batch.pk, model, line.index)
    with own_call(surface=surface, account=batch.account, request_id=request_id,
                  tags={"batch": batch.pk, "custom_id": line.custom_id[:200]}) as exchange:
        exchange.batch = BatchUse(batch.pk, line.usage_key)
        exchange.status = result.status_code
        exchange.model = public
        input_tokens, output_tokens, cached, written = clouds.usage_of(batch.kind, result.body)
        meter(account_id=batch.account_id, model=public, surface=surface, input_tokens=input_tokens,
              output_tokens=output_tokens, request_id=request_id, key=line.usage_key,
              price=target.price if target is not None else None, cached_input_tokens=cached,
              cache_write_input_tokens=written)


def _save(batch_id: str, chunk: list[tuple[BatchLine, clouds.Result, str]], token: str) -> None:
    now = timezone.now()

    def save() -> list[str]:
        saved = []
        for line, result, request_id in chunk:
            if BatchLine.objects.filter(pk=line.pk, status=Line.RUNNING, claim=UPSTREAM).update(
                    status=result.status, tries=line.tries + 1, status_code=result.status_code, result=result.body,
                    request_id=request_id, ended_at=now, claim=""):
                saved.append(result.status)
        Batch.objects.filter(pk=batch_id, runner=token).update(
            runner_until=timezone.now() + timedelta(seconds=settings.BATCH_LEASE_SECONDS))
        return saved

    for status in durably(save, what=f"batch {batch_id}: answers from its cloud"):
        batch_metrics.line_ended(status)
