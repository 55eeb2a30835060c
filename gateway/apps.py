import asyncio
import contextvars
from types import SimpleNamespace

from django.apps import AppConfig
from django.core import checks


class GatewayConfig(AppConfig):
    name = "gateway"
    verbose_name = "Models and usage"  # the console's section: servers, models, aliases, usage records

    def ready(self) -> None:
        from gateway.ops import process_start

        # first: the folders, the metrics folder in the environment and the kept secret key, which the
        # settings only name (they read the environment and nothing else)
        process_start.prepare()

        from django.conf import settings

        from gateway.calls import attempt_observers, attempts
        from gateway.console import audit_trail
        from gateway.files import store as file_store
        from gateway.guard import PolicyError, model_check, parse_policy
        from gateway.limits.quotas import quota_forget_unsure
        from gateway.registry import google_auth, signals
        from gateway.registry.config_file import guardrails as config_guardrails
        from gateway.registry.snapshot import loaded_server_keys
        from gateway.telemetry import logjson, redact
        from gateway.usage import call_log
        from gateway.usage.writer import usage_writer

        for observer in attempt_observers.ALL:  # each model tried, told once to each concern
            attempts.observe(observer)
        checks.register(console_deploy_checks, checks.Tags.security, deploy=True)
        audit_trail.follow(settings.AUDIT_TRAIL_MODELS)  # the console's audit trail (django-auditlog)
        file_store.connect()  # a deleted file's bytes leave the files storage once its row is gone
        signals.connect()  # a change to the registry moves its stamp (gateway/registry/snapshot.py)
        redact.secret_sources.append(loaded_server_keys)  # the servers' keys never reach a log line
        redact.secret_sources.append(google_auth.tokens)  # nor Google's access tokens (Vertex AI)
        # a group's guardrails in applyconfig's file and the admin's page, checked by the guard's own parser
        config_guardrails.use(parse_policy, PolicyError)
        # the usage drainer drops the quota counters an addition may have missed, after each cycle
        usage_writer.after_cycle.append(lambda **cycle: quota_forget_unsure())
        # the calls log: a call's line spooled when its request ends, drained by the same thread
        logjson.ended.append(call_log.record_call)
        usage_writer.after_cycle.append(call_log.drain)
        usage_writer.also_pending.append(call_log.call_log.pending)  # written at exit too
        model_check.use(ask_guard_model)  # the guardrails' model check asks through the registry


# Who a guard model's call is made for: the model the operator named for a group's guardrails, whatever
# the group itself may use (the group is guarded by it, not its user).
GUARD_CALLER = SimpleNamespace(id=None, all_models=True, remote_servers_allowed=True)


async def ask_guard_model(model_id: str, messages: list[dict]) -> str:
    """A guardrail's model check (gateway/guard/model_check.py): a whole completion through the
    registry's routing and fallbacks, the guard's own call: never screened itself, not metered to
    the account, and outside the request's calls log (its attempts are not the request's chain)."""
    from gateway.calls.completion import complete
    from gateway.registry.routing import plan_chain
    from gateway.state.workers import in_worker
    from gateway.telemetry import logjson

    async def call() -> str:
        chain = await in_worker(plan_chain)(model_id, group=GUARD_CALLER)
        body = {"model": model_id, "messages": messages, "max_tokens": 20, "temperature": 0}
        completion = await complete(chain, body, refusals_fall_through=True)
        if completion.cut is not None:
            raise RuntimeError("the guard model's reply stopped midway")
        return completion.text

    context = contextvars.copy_context()
    context.run(logjson.current.set, None)
    return await asyncio.get_running_loop().create_task(call(), context=context)


def console_deploy_checks(app_configs, **kwargs):
    """`check --deploy` with the console's middleware in view.

    Django's deploy checks of HSTS, the SSL redirect, nosniff, the referrer and opener policies,
    X-Frame-Options and the CSRF cookie pass without a word when the security, clickjacking or
    CSRF middleware is not in MIDDLEWARE. Ours are in CONSOLE_MIDDLEWARE, applied by
    gateway.web.surfaces.SurfaceMiddleware (the security middleware to the API surfaces too), so
    those checks are run again here as if they were in MIDDLEWARE; the three "not in MIDDLEWARE"
    warnings are silenced in the settings."""
    from django.conf import settings
    from django.core.checks.security import base, csrf
    from django.test.utils import override_settings

    depend_on_middleware = [
        base.check_sts, base.check_sts_include_subdomains, base.check_sts_preload,
        base.check_content_type_nosniff, base.check_ssl_redirect, base.check_xframe_deny,
        base.check_referrer_policy, base.check_cross_origin_opener_policy, csrf.check_csrf_cookie_secure,
    ]
    # the console's CSRF middleware is CsrfViewMiddleware's subclass (gateway/web/console_csrf.py): named as Django's
    in_view = [*settings.MIDDLEWARE, *settings.CONSOLE_MIDDLEWARE, "django.middleware.csrf.CsrfViewMiddleware"]
    with override_settings(MIDDLEWARE=in_view):
        return [message for check in depend_on_middleware for message in check(app_configs)]
