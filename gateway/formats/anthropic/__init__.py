"""The Anthropic Messages format and the neutral chat form: requests both ways (`to_chat`,
`from_chat`), whole replies (`replies`), streams (`streams`), and an Anthropic server's events
gathered into a Message (`events`).

May import: `gateway.formats`, `gateway.web`."""
