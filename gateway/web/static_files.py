"""The console's static files under ASGI, without Django's warning on every file.

WhiteNoise (6.12, the latest) is a synchronous middleware that answers with a `FileResponse`
whose content is a synchronous iterator. Django's ASGI handler then warns ("StreamingHttpResponse
must consume synchronous iterators in order to serve them asynchronously") for each file and reads
the whole file into a list in a worker thread before sending it. This is WhiteNoise's middleware
with the same files, headers and statuses, made async-capable: in an async chain it reads the file
in worker threads, a block at a time, from an asynchronous iterator; in a synchronous chain (the
test client, management commands) it is WhiteNoise as it is. It also spares the console chain the
thread hop a synchronous middleware costs.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware

BLOCK_BYTES = 64 * 1024  # one worker-thread read each: most of the admin's files are one block


async def file_blocks(filelike):
    """The file's bytes, read in worker threads; nothing for an answer without a body (304, HEAD)."""
    if filelike is None:
        return
    read = sync_to_async(filelike.read, thread_sensitive=False)
    while block := await read(BLOCK_BYTES):
        yield block


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None, settings=settings):
        super().__init__(get_response, settings)
        if get_response is not None and iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request):
        if self.autorefresh:  # DEBUG: looks on the disk
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await self.get_response(request)
        response = await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
        response.streaming_content = file_blocks(response.file_to_stream)  # the file is still closed with it
        return response
