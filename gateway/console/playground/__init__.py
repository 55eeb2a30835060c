"""The console's playground, /admin/playground/: staff try a model or an alias of the registry with a
system prompt, a conversation, a temperature and a token ceiling, and read the reply as it streams,
with its time to first token, its total time, its tokens and its cost.

The call is the API's: made as the signed-in staff account, it goes through the same ceiling, model
permissions, quotas and budgets (`gateway/calls/plan.py` call_plan) and is one model call
(`gateway/calls/model_call.py` ModelCall, metered once), so a refusal is the one an API call of that
account gets. Its usage records and its row in the calls log name the surface "playground".

The page (`page`), the body it sends read as the chat form (`request`), and the streamed reply
(`reply`: server-sent events the page's script reads with fetch()).

May import: the console's other modules and every room below the console."""
