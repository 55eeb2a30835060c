"""X-Request-Id on every response (spec 7.4)."""

import re
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def request_id_for(request) -> str:
    """The client's own id when it is 1 to 64 letters, digits, '-' or '_'; a new one otherwise."""
    sent = request.headers.get("X-Request-Id", "")
    return sent if CLIENT_REQUEST_ID.match(sent) else uuid.uuid4().hex


class RequestIdMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

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
