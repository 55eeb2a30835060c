"""The operator console for the model registry. A server's API key is write-only."""

from django import forms
from django.contrib import admin, messages

from gateway.console.secret_forms import WriteOnlySecretForm, secret_input
from gateway.console.server_admin import HEALTH_FIELDS, ServerHealthAdmin
from gateway.models import Model, ModelFallback, ModelServer, UsageRecord
from gateway.registry import discovery

# The console's "View site" link pointed at "/", which nothing answers: no link.
admin.site.site_url = None


class ModelServerForm(WriteOnlySecretForm):
    secret_field = "api_key"
    api_key = secret_input("API key")
    clear_api_key = forms.BooleanField(required=False, label="Clear API key")

    class Meta:
        model = ModelServer
        fields = ["name", "kind", "base_url", "api_key", "is_remote", "enabled", "connect_timeout", "read_timeout",
                  "drop_unsupported_fields", "structured_output"]
        # The admin does not escape help texts: the model's "<server>/<model>" showed as "/".
        help_texts = {"name": "Used in model ids: <code>&lt;server&gt;/&lt;model&gt;</code>."}


class ModelInline(admin.TabularInline):
    model = Model
    fields = ["name", "supports_chat", "supports_embeddings", "supports_audio", "enabled", "is_default"]
    fields += ["unlisted_since"]
    readonly_fields = ["unlisted_since"]
    extra = 0


@admin.register(ModelServer)
class ModelServerAdmin(ServerHealthAdmin):
    """Health read-only beside the registry's fields; discovery when a server is saved
    (gateway/console/server_admin.py)."""

    form = ModelServerForm
    list_display = ["name", "kind", "base_url", "is_remote", "enabled", "has_api_key"]
    list_display += ["discovered_at", "discovery_error", *HEALTH_FIELDS]
    actions = ["discover_models"]
    list_filter = ["kind", "is_remote", "enabled"]
    search_fields = ["name", "base_url"]
    inlines = [ModelInline]

    @admin.display(boolean=True, description="API key set")
    def has_api_key(self, server):
        return bool(server.api_key)

    @admin.action(description="Discover models (ask the selected servers what they serve)")
    def discover_models(self, request, queryset):
        for report in discovery.discover_models(servers=queryset):
            self.message_user(request, report.summary(), messages.ERROR if report.error else messages.SUCCESS)


class FallbackInline(admin.TabularInline):
    model = ModelFallback
    fk_name = "model"
    fields = ["position", "fallback"]
    autocomplete_fields = ["fallback"]
    extra = 0


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    # Few, narrow columns: beside the navigation and the filters, one column per capability (and the
    # server again, already in the id) made the list scroll sideways.
    list_display = ["__str__", "capabilities", "enabled", "is_default"]
    list_filter = ["server", "enabled", "is_default", "supports_chat", "supports_embeddings", "supports_audio"]
    list_select_related = ["server"]
    search_fields = ["name", "server__name"]
    inlines = [FallbackInline]

    @admin.display(description="Capabilities")
    def capabilities(self, model):
        names = [name for name, on in (("chat", model.supports_chat), ("embeddings", model.supports_embeddings),
                                       ("audio", model.supports_audio)) if on]
        return ", ".join(names) or "none"


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    """Read-only: usage is written by the gateway, never by hand."""

    list_display = ["created_at", "account", "model", "surface", "input_tokens", "output_tokens", "request_id"]
    list_filter = ["surface", "model"]
    search_fields = ["account__email", "model", "request_id"]
    date_hierarchy = "created_at"
    list_select_related = ["account"]

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
