"""Talking to model servers: the HTTP/1.1 client (`http_client`), Server-Sent Events (`sse`),
one provider per server kind (`providers`) and the gathering of a streamed reply (`replies`).

May import: `gateway.limits` and below."""
