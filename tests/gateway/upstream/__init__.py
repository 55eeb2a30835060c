"""The upstream HTTP client, SSE and the reference upstream model server (gateway/upstream/, tests/upstream/)."""
