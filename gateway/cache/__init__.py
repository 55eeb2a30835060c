"""The exact response cache: a whole, successful chat reply kept for the account group's
`response_cache_ttl` seconds and given again, without calling a model server, to the same request of
the same group, whole or streamed as the client asks. The key (`keys`: the surface, the model asked
for, the request's body without what does not change the reply, and what `Cache-Control` asks), the
reply recorded as its chunks and replayed (`entry`), where it is kept (`store`: the shared state's
Redis from the event loop, or the Django cache on the embedded default) and the one object a surface
talks to (`reply_cache`).

May import: `gateway.upstream` and below."""
