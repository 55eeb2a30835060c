"""Batches: bulk model calls at a lower price, run by the gateway's own workers on any kind of server.

An OpenAI batch (`/v1/batches`, an input file of JSON lines) or an Anthropic message batch
(`/v1/messages/batches`, the requests in the body) is a Batch with one BatchLine per request. Each line is
one call of the surface it names, through the very view a live call goes through (`line_call`), claimed
once by a worker of the batch queue (`runner`), its answer kept on the line and its usage metered at the
batch price. The HTTP shapes are compat's (compat/batches.py, compat/message_batches.py); this app holds
what they share: the rows, the checks of the lines, the running and the files a finished batch writes.

May import: routines (its durable writes), accounts and gateway; never compat or native."""
