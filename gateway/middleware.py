"""X-Request-Id on every response (spec 7.4); 503 instead of 500 while a backing service is down."""

import logging
import re
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings

from gateway.errors import ServiceUnavailable, outage_of, render_error

logger = logging.getLogger(__name__)

CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def request_id_for(request) -> str:
    """The client's own id when it is 1 to 64 letters, digits, '-' or '_'; a new one otherwise."""
    sent = request.headers.get("X-Request-Id", "")
    return sent if CLIENT_REQUEST_ID.match(sent) else uuid.uuid4().hex


class HybridMiddleware:
    """A middleware that runs sync or async, as the handler it wraps does."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)


class RequestIdMiddleware(HybridMiddleware):
    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        request.request_id = request_id_for(request)
        response = self.get_response(request)
        response["X-Request-Id"] = request.request_id
        return response

    async def __acall__(self, request):
        request.request_id = request_id_for(request)
        response = await self.get_response(request)
        response["X-Request-Id"] = request.request_id
        return response


class OutageMiddleware(HybridMiddleware):
    """A view (sync or async, the webhook ingest, the console's) that raises because PostgreSQL,
    Redis or the task queue cannot be reached is answered 503 with Retry-After in its surface's
    error shape, and the cause is logged in one line (no stack trace). Any other exception goes
    on to Django's 500. Sits inside RequestIdMiddleware, so the 503 carries the request id."""

    def __call__(self, request):
        return self.get_response(request)  # under ASGI a coroutine, which the caller awaits

    def process_exception(self, request, exception):
        what = outage_of(exception)
        if what is None:
            return None
        logger.warning("%s %s answered 503: %s cannot be reached (%s: %s)", request.method, request.path, what,
                       type(exception).__name__, str(exception).strip().splitlines()[0] if str(exception) else "")
        return render_error(request, ServiceUnavailable(what, settings.OUTAGE_RETRY_AFTER_SECONDS))
