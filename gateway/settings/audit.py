"""Settings of the console's audit trail (django-auditlog, gateway/console/audit_trail.py): which models
it follows, and which of their fields it leaves out or masks.

What an operator configures in the console is followed: groups (quotas, budgets, models), accounts,
API keys (issued and revoked), model servers, models (prices, fallbacks), aliases, MCP servers and
routines. Left out: what the gateway moves by itself (failed logins, discovery's stamps, a key's last
use, a routine's run times) and every hash; masked (set or not, changed or not): the secrets it keeps in
clear. Nothing here is read from the environment: which changes are audited is the product's.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

# Each followed model (registered with auditlog by gateway/console/audit_trail.py `follow`, at start-up): its
# own columns are followed but its id and those left out (`leave_out`), or only those named (`only`); `mask`ed
# ones are written as set or not (or as its `mask_callable` writes them); `m2m` are its many-to-many fields, whose
# additions and removals are written.
# Relations from other models (a group's accounts, a server's models) are never part of an entry.
AUDIT_TRAIL_MODELS = {
    # a guardrails' webhook secret: the list is written with each item's `secret` masked, the rest as it is
    "accounts.AccountGroup": {"m2m": ["allowed_models", "allowed_aliases"], "mask": ["guardrails"],
                              "mask_callable": "gateway.console.audit_trail.mask_guardrails"},
    "accounts.Account": {"leave_out": ["password", "last_login", "failed_logins", "locked_until"],
                         "m2m": ["groups", "user_permissions"]},
    # never key_hash nor the last use; the preview is what the console shows of a key anyway
    "accounts.ApiKey": {"only": ["account", "preview", "created_at", "expires_at"]},
    "gateway.ModelServer": {"leave_out": ["discovered_at", "discovery_error"],
                            "mask": ["api_key", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
                                     "azure_client_secret"]},
    "gateway.Model": {"leave_out": ["unlisted_since"]},
    "gateway.ModelFallback": {},
    "gateway.Alias": {},
    "gateway.AliasDeployment": {},
    "gateway.AliasFallback": {},
    "native.McpServer": {"mask": ["auth_header_value"], "m2m": ["groups"]},
    "routines.Routine": {"leave_out": ["consecutive_failures", "last_run_at", "next_run_at", "updated_at"],
                         "mask": ["webhook_secret", "webhook_token"]},
}
# A masked field's value in the log: "********" when set, empty when not (never a part of it, as auditlog's
# default mask would keep the second half).
AUDITLOG_MASK_CALLABLE = "gateway.console.audit_trail.mask_secret"
# The client's address on each entry (the console's requests; as the rate limits read it).
AUDITLOG_DISABLE_REMOTE_ADDR = False
# Changes kept as JSON values and compared as the model holds them: a decimal read back as 0.6000 and the
# 0.6 a form sets are the same amount, not a change (compared as text, every untouched budget would be one).
AUDITLOG_STORE_JSON_CHANGES = True
# A foreign key's change written as the object's name (a group's name, a model's id), not its number.
AUDITLOG_USE_FK_STRING_REPRESENTATION = True


def from_env(env=None) -> dict:
    """The settings above, the same whatever the environment."""
    return {name: value for name, value in globals().items() if name.isupper()}
