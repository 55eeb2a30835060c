"""A model call end to end: its plan (`plan`: chain and quota), the one loop over a chain (`chain`)
and the record of each model tried (`attempts`, told to `attempt_observers`), a chat reply (`dispatch`),
a whole completion for the agent (`completion`), embeddings, token counting (`tokens`) and the
metering of what was used (`metering`).

May import: `gateway.upstream` and below."""
