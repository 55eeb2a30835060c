"""A model call end to end: its plan (`plan`: chain and quota), the one loop over a chain (`chain`)
and the record of each model tried (`attempts`, told to `attempt_observers`), a chat reply (`dispatch`),
a whole completion for the agent (`completion`), embeddings, token counting (`tokens`) and the
metering of what was used (`metering`); the group's guardrails on each call's way (`screened`: the
input checks before any model, the output checks over the reply's chunks).

May import: `gateway.guard` and below."""
