"""A model call end to end: its plan (`plan`: chain and quota), running the chain (`dispatch`),
a whole completion for the agent (`completion`), embeddings, token counting (`tokens`) and the
metering of what was used (`metering`).

May import: `gateway.upstream` and below."""
