"""The operator console for the model registry: servers, models, aliases. A server's API key is write-only."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join
from unfold.admin import ModelAdmin as ThemedModelAdmin
from unfold.admin import TabularInline
from unfold.widgets import UnfoldAdminTextareaWidget

from gateway.console import files_admin  # noqa: F401 — registers "Files"
from gateway.console.audit_trail import audit_trail, show_audit_log
from gateway.console.call_log import admin as call_log_admin  # noqa: F401 — registers "Calls"
from gateway.console.fields.money import (
    DEPLOYMENT_PRICE_HELP,
    PRICE_FIELDS,
    MoneyFormMixin,
    currency,
    price_summary,
    prices_title,
)
from gateway.console.fields.secret import WriteOnlySecretForm, clear_box, secret_input, without_clear_boxes
from gateway.console.server_admin import HEALTH_FIELDS, ServerHealthAdmin
from gateway.console.server_test_admin import TEST_FIELD, ServerTestAdmin
from gateway.console.theme import server_columns
from gateway.models import Alias, AliasDeployment, AliasFallback, Model, ModelFallback, ModelServer, UsageRecord
from gateway.registry import discovery
from gateway.registry.default_model import choose_default, chosen_text
from gateway.registry.prices import money_text
from gateway.state import loads

# each cloud's own settings, shown while the form's kind is that cloud (`conditional_fields`)
BEDROCK_FIELDS = ("region", "aws_access_key_id", "aws_secret_access_key", "clear_aws_secret_access_key",
                  "aws_session_token", "clear_aws_session_token")
AZURE_FIELDS = ("api_version", "azure_tenant_id", "azure_client_id", "azure_client_secret",
                "clear_azure_client_secret", "azure_authority_host")
VERTEX_FIELDS = ("gcp_project", "gcp_credentials_file")
CLOUD_FIELDS = (*BEDROCK_FIELDS, *AZURE_FIELDS, *VERTEX_FIELDS, "anthropic_betas")
# Bedrock's batch inference, shown with forward_batches (the settings) while the form's kind is Bedrock
BEDROCK_BATCH_FIELDS = ("batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url")
BATCH_DISCOUNT = "batch_discount_percent"  # shown with the prices: of a batch line's cost

# The console's "View site" link pointed at "/", which nothing answers: no link.
admin.site.site_url = None
# Branded as the gateway wherever the admin names itself (unfold's header and titles: settings.UNFOLD).
admin.site.site_header = admin.site.site_title = "Model gateway"
admin.site.index_title = "Home"


class ModelServerForm(WriteOnlySecretForm):
    secret_fields = ("api_key", "aws_secret_access_key", "aws_session_token", "azure_client_secret")
    api_key = secret_input("API key")
    clear_api_key = clear_box("API key")
    aws_secret_access_key = secret_input("AWS secret access key")
    clear_aws_secret_access_key = clear_box("AWS secret access key")
    aws_session_token = secret_input("AWS session token")
    clear_aws_session_token = clear_box("AWS session token")
    azure_client_secret = secret_input("Entra ID client secret")
    clear_azure_client_secret = clear_box("Entra ID client secret")

    class Meta:
        model = ModelServer
        fields = ["name", "kind", "base_url", "api_key", "clear_api_key", *CLOUD_FIELDS, "is_remote", "enabled",
                  "connect_timeout", "read_timeout", "drop_unsupported_fields", "structured_output", "forward_batches",
                  *BEDROCK_BATCH_FIELDS, "batch_gcs_uri"]
        # The admin does not escape help texts: the model's "<server>/<model>" showed as "/".
        help_texts = {"name": "Used in model ids: <code>&lt;server&gt;/&lt;model&gt;</code>."}
        widgets = {"anthropic_betas": UnfoldAdminTextareaWidget(attrs={"rows": 3})}


class ModelInline(TabularInline):
    model = Model
    fields = ["name", "supports_chat", "supports_embeddings", "supports_audio", "enabled", "is_default"]
    fields += ["unlisted_since"]
    readonly_fields = ["unlisted_since"]
    extra = 0


@admin.register(ModelServer)
@audit_trail
class ModelServerAdmin(ServerTestAdmin, ServerHealthAdmin):
    """Health read-only beside the registry's fields; discovery when a server is saved
    (gateway/console/server_admin.py)."""

    form = ModelServerForm
    # narrow enough for 1366 pixels beside the sidebar (gateway/console/theme/server_columns.py)
    list_display = ["name", server_columns.kind_label, server_columns.address, "enabled", server_columns.key_set,
                    server_columns.discovery, *HEALTH_FIELDS]
    actions = ["discover_models"]
    list_filter = ["kind", "is_remote", "enabled"]
    search_fields = ["name", "base_url"]
    inlines = [ModelInline]
    # a setting of one kind of server only, shown while the form's kind is that one (unfold's Alpine.js)
    conditional_fields = {"structured_output": f"['{ModelServer.Kind.ANTHROPIC}', '{ModelServer.Kind.BEDROCK}', "
                                               f"'{ModelServer.Kind.VERTEX}'].includes(kind)",
                          # a cloud is always remote (ModelServer.clean)
                          "is_remote": f"['{ModelServer.Kind.OPENAI}', '{ModelServer.Kind.ANTHROPIC}'].includes(kind)",
                          **{name: f"kind == '{ModelServer.Kind.BEDROCK}'" for name in (*BEDROCK_FIELDS,
                                                                                       *BEDROCK_BATCH_FIELDS)},
                          # a region is Bedrock's and Vertex AI's (its location), and so are the betas carried to Claude
                          **dict.fromkeys(("region", "anthropic_betas"), f"['{ModelServer.Kind.BEDROCK}', "
                                                                         f"'{ModelServer.Kind.VERTEX}'].includes(kind)"),
                          **{name: f"kind == '{ModelServer.Kind.VERTEX}'" for name in VERTEX_FIELDS},
                          "batch_gcs_uri": f"kind == '{ModelServer.Kind.VERTEX}'",  # where its batches go
                          **{name: f"kind == '{ModelServer.Kind.AZURE}'" for name in AZURE_FIELDS}}

    def get_fieldsets(self, request, obj=None):
        """Where the server is and its key first, then (a saved server) "Test connection" with its
        health, all within the first screen at 1366x768; its settings after."""
        fields = without_clear_boxes(self.get_fields(request, obj), obj)
        first = [name for name in ("name", "kind", "base_url", "api_key", "clear_api_key", *CLOUD_FIELDS)
                 if name in fields]
        connection = [name for name in (TEST_FIELD, *HEALTH_FIELDS) if name in fields]
        rest = [name for name in fields if name not in first and name not in connection]
        return [(None, {"fields": first}), *([("Connection", {"fields": connection})] if connection else []),
                ("Settings", {"fields": rest})]

    @admin.display(boolean=True, description="API key set")
    def has_api_key(self, server):
        return bool(server.api_key)

    @admin.action(description="Discover models (ask the selected servers what they serve)")
    def discover_models(self, request, queryset):
        for report in discovery.discover_models(servers=queryset):
            self.message_user(request, report.summary(), messages.ERROR if report.error else messages.SUCCESS)
            if report.default_chosen:
                self.message_user(request, chosen_text(report.default_chosen), messages.INFO)


class FallbackInline(TabularInline):
    model = ModelFallback
    fk_name = "model"
    fields = ["position", "fallback"]
    autocomplete_fields = ["fallback"]
    extra = 0


class ModelForm(MoneyFormMixin, forms.ModelForm):
    class Meta:
        model = Model
        fields = "__all__"


@admin.register(Model)
@audit_trail
class ModelAdmin(ThemedModelAdmin):
    # Few, narrow columns: beside the navigation and the filters, one column per capability (and the
    # server again, already in the id) made the list scroll sideways. The prices share one.
    form = ModelForm
    list_display = ["__str__", "capabilities", "enabled", "is_default", "prices"]
    list_filter = ["server", "enabled", "is_default", "supports_chat", "supports_embeddings", "supports_audio"]
    list_select_related = ["server"]
    search_fields = ["name", "server__name"]
    inlines = [FallbackInline]

    def get_fieldsets(self, request, obj=None):
        """The prices in a section of their own, named with the installation's currency, with the batch
        discount (what a batch line costs of them)."""
        priced = [*PRICE_FIELDS, BATCH_DISCOUNT]
        others = [name for name in self.get_fields(request, obj) if name not in priced]
        return [(None, {"fields": others}),
                (prices_title(), {"fields": priced,
                                  "description": "A change applies to the calls metered from then on; past "
                                                 "usage keeps the cost it was metered with."})]

    def save_model(self, request, obj, form, change):
        """With no default model yet, a chat model added here (or made an enabled chat model here)
        becomes it (gateway/registry/default_model.py); another change, a price, leaves that alone."""
        super().save_model(request, obj, form, change)
        if change and not {"enabled", "supports_chat"} & set(form.changed_data):
            return
        chosen = choose_default([obj])
        if chosen is not None:
            self.message_user(request, chosen_text(chosen.public_id), messages.INFO)

    @admin.display(description="Price per M tokens")
    def prices(self, model):
        return price_summary(model)

    @admin.display(description="Capabilities")
    def capabilities(self, model):
        names = [name for name, on in (("chat", model.supports_chat), ("embeddings", model.supports_embeddings),
                                       ("audio", model.supports_audio)) if on]
        return ", ".join(names) or "none"


class AliasDeploymentForm(MoneyFormMixin, forms.ModelForm):
    money_help = dict.fromkeys(PRICE_FIELDS, DEPLOYMENT_PRICE_HELP)

    class Meta:
        model = AliasDeployment
        fields = ["model", "weight", *PRICE_FIELDS, BATCH_DISCOUNT]


class AliasDeploymentInline(TabularInline):
    """A deployment's weight, and its own prices per million tokens and batch discount (each left empty is its
    model's)."""

    model = AliasDeployment
    form = AliasDeploymentForm
    fields = ["model", "weight", *PRICE_FIELDS, BATCH_DISCOUNT]
    autocomplete_fields = ["model"]
    extra = 0


class AliasFallbackInline(TabularInline):
    model = AliasFallback
    fk_name = "alias"
    fields = ["position", "fallback"]
    autocomplete_fields = ["fallback"]
    extra = 0
    verbose_name_plural = "fallbacks (after every deployment, before the default model)"


@admin.register(Alias)
@audit_trail
class AliasAdmin(ThemedModelAdmin):
    """An alias, its weighted deployments and its fallbacks; beside them, each deployment's share of
    the calls, calls in flight and moving time to first byte, as every process told them
    (gateway/state/loads.py)."""

    list_display = ["name", "policy", "affinity", "enabled", "deployment_count"]
    list_filter = ["policy", "affinity", "enabled"]
    search_fields = ["name"]
    fields = ["name", "policy", "affinity", "enabled", "deployments_now"]
    readonly_fields = ["deployments_now"]
    inlines = [AliasDeploymentInline, AliasFallbackInline]

    def get_queryset(self, request):
        from django.db.models import Count

        return super().get_queryset(request).annotate(deployment_total=Count("deployments"))

    @admin.display(description="Deployments", ordering="deployment_total")
    def deployment_count(self, alias):
        return alias.deployment_total

    @admin.display(description="Deployments now")
    def deployments_now(self, alias):
        """Share of the calls (this quarter of an hour and the one before), calls in flight, and the
        moving time to first byte, per deployment."""
        rows = list(alias.deployments.select_related("model__server")) if alias.pk else []
        if not rows:
            return "No deployment yet."
        board = loads.board([row.model_id for row in rows])
        total = sum(board[row.model_id].recent_calls for row in rows)
        cells = []
        for row in rows:
            load = board[row.model_id]
            share = f"{100 * load.recent_calls / total:.0f} % ({load.recent_calls})" if total else "no calls"
            latency = f"{load.latency_ms:.0f} ms" if load.latency_ms is not None else "not measured"
            cells.append((row.model.public_id, row.weight, share, load.in_flight, latency))
        body = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", cells)
        return format_html("<table><thead><tr><th>Deployment</th><th>Weight</th><th>Share of calls</th>"
                           "<th>In flight</th><th>Time to first byte</th></tr></thead><tbody>{}</tbody></table>", body)


@admin.register(UsageRecord)
class UsageRecordAdmin(ThemedModelAdmin):
    """Read-only: usage is written by the gateway, never by hand."""

    list_display = ["created_at", "account", "model", "surface", "input_tokens", "output_tokens", "cost", "request_id"]
    list_filter = ["surface", "model"]
    search_fields = ["account__email", "model", "request_id"]
    date_hierarchy = "created_at"
    list_select_related = ["account"]

    @admin.display(description="Cost", ordering="cost_units")
    def cost(self, record):
        """What the call cost when it was metered (exact; a later price change never rewrites it)."""
        return f"{money_text(record.cost_units)} {currency()}"

    def get_urls(self):
        """The usage console and its CSV export (gateway/console/usage_views.py), staff only."""
        from django.urls import path

        from gateway.console.usage_views import usage_console, usage_csv

        site = self.admin_site
        return [
            path("console/", site.admin_view(lambda r: usage_console(r, site)), name="gateway_usage_console"),
            path("console/csv/", site.admin_view(lambda r: usage_csv(r, site)), name="gateway_usage_csv"),
            *super().get_urls(),
        ]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# The audit log's list, in the console's theme (gateway/console/audit_trail.py).
show_audit_log(admin.site)
