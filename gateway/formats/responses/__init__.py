"""OpenAI's Responses format and the neutral chat form: requests and replies (`translate`), the
fields beyond messages (`fields`), function tools (`tools`) and streams (`stream`).

May import: `gateway.formats`, `gateway.web`."""
