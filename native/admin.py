"""The operator console for the native surface: profiles, collections, conversations, MCP servers."""

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import Count, F
from unfold.admin import ModelAdmin, TabularInline

from gateway.console.audit_trail import audit_trail
from gateway.console.fields.secret import WriteOnlySecretForm, clear_box, secret_input, without_clear_boxes
from gateway.registry.snapshot import registry
from native.models import Collection, Conversation, Document, McpServer, Message, Profile

# ---- profiles ----------------------------------------------------------------------------------


class ProfileForm(forms.ModelForm):
    class Meta:
        model = Profile
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "model" in self.fields:  # which model "empty" means now, or that a chat with it cannot run
            self.fields["model"].help_text = default_model_help()

    def clean_temperature(self):
        value = self.cleaned_data.get("temperature")
        if value is not None and not 0 <= value <= 2:
            raise forms.ValidationError("Between 0 and 2, or empty for the model's own.")
        return value

    def clean_tools(self):
        value = self.cleaned_data.get("tools")
        if value in (None, ""):
            return []
        if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
            raise forms.ValidationError('A JSON list of tool names, for example ["web_search"].')
        return value


def default_model_help() -> str:
    default = registry().default
    if default is None:
        return ("Empty: the default model. None is set, so a chat with this profile cannot run: tick \"Is default\" "
                "on a chat model (Models).")
    return f"Empty: the default model ({default.public_id})."


@admin.register(Profile)
class ProfileAdmin(ModelAdmin):
    """Presets granted to groups: only members of a granted group see a profile (none: nobody)."""

    form = ProfileForm
    list_display = ["name", "title", "model", "temperature", "enabled"]
    list_filter = ["enabled", "groups"]
    search_fields = ["name", "title", "description"]
    autocomplete_fields = ["model"]
    filter_horizontal = ["groups", "collections"]
    list_select_related = ["model__server"]
    fields = ["name", "title", "description", "enabled", "model", "system_prompt", "temperature", "tools",
              "collections", "groups"]


# ---- MCP servers (the agent's tools) ----------------------------------------------------------


class McpServerForm(WriteOnlySecretForm):
    """The auth header's value is write-only: never sent to the page, kept when left empty."""

    secret_fields = ("auth_header_value",)
    auth_header_value = secret_input("auth header value")
    clear_auth_header_value = clear_box("auth header value")

    class Meta:
        model = McpServer
        fields = ["name", "url", "auth_header_name", "auth_header_value", "clear_auth_header_value", "is_remote",
                  "enabled", "groups", "timeout"]

    def clean_timeout(self):
        value = self.cleaned_data.get("timeout")
        if value is not None and not 0 < value <= 600:
            raise forms.ValidationError("Seconds, more than 0 and at most 600.")
        return value


@admin.register(McpServer)
@audit_trail
class McpServerAdmin(ModelAdmin):
    """Servers whose tools the agent offers as `<name>__<tool>`; no group ticked: every group."""

    form = McpServerForm
    list_display = ["name", "url", "is_remote", "enabled", "has_auth_header", "timeout"]
    list_filter = ["enabled", "is_remote", "groups"]
    search_fields = ["name", "url"]
    filter_horizontal = ["groups"]

    def get_fields(self, request, obj=None):
        return without_clear_boxes(super().get_fields(request, obj), obj)

    @admin.display(boolean=True, description="Auth header set")
    def has_auth_header(self, server):
        return bool(server.auth_header_value)


# ---- collections ------------------------------------------------------------------------------


class DocumentInline(TabularInline):
    model = Document
    fields = ["name", "content_type", "size", "created_at"]
    readonly_fields = fields
    extra = 0
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False  # documents are written through the API, which embeds them


@admin.register(Collection)
class CollectionAdmin(ModelAdmin):
    """Accounts' collections. Documents are added through the API (they must be embedded);
    here they can be read and deleted."""

    list_display = ["name", "account", "embedding_model", "documents", "updated_at"]
    search_fields = ["name", "account__email"]
    list_select_related = ["account"]
    fields = ["account", "name", "description", "embedding_model", "vectors_version", "created_at", "updated_at"]
    readonly_fields = ["account", "embedding_model", "vectors_version", "created_at", "updated_at"]
    inlines = [DocumentInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(document_count=Count("documents"))

    @admin.display(description="Documents", ordering="document_count")
    def documents(self, collection):
        return collection.document_count

    def has_add_permission(self, request):
        return False  # an account creates its collections through the API

    def save_formset(self, request, form, formset, change):
        super().save_formset(request, form, formset, change)
        if formset.deleted_objects:
            _vectors_changed([form.instance.pk])


@admin.register(Document)
class DocumentAdmin(ModelAdmin):
    list_display = ["name", "collection", "content_type", "size", "created_at"]
    list_filter = ["content_type"]
    search_fields = ["name", "collection__name", "collection__account__email"]
    list_select_related = ["collection"]
    fields = ["collection", "name", "content_type", "size", "created_at", "text"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        with transaction.atomic():
            super().delete_model(request, obj)
            _vectors_changed([obj.collection_id])

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            collection_ids = list(queryset.values_list("collection_id", flat=True).distinct())
            super().delete_queryset(request, queryset)
            _vectors_changed(collection_ids)


def _vectors_changed(collection_ids):
    """A document deleted here: every process reloads the collection's vectors on its next search."""
    Collection.objects.filter(pk__in=collection_ids).update(vectors_version=F("vectors_version") + 1,
                                                            vectors_generation=F("vectors_generation") + 1)


# ---- conversations (read-mostly: written by native chat) --------------------------------------


class MessageInline(TabularInline):
    model = Message
    fields = ["created_at", "role", "status", "model", "content", "request_id"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(ModelAdmin):
    """Accounts' conversations, to read; the operator may delete one, nothing else changes here."""

    list_display = ["__str__", "account", "profile", "model", "updated_at", "in_trash"]
    list_filter = [("trashed_at", admin.EmptyFieldListFilter), "profile"]
    search_fields = ["title", "account__email"]
    list_select_related = ["account", "profile"]
    date_hierarchy = "updated_at"
    fields = ["account", "title", "profile", "model", "created_at", "updated_at", "trashed_at"]
    readonly_fields = fields
    inlines = [MessageInline]

    @admin.display(boolean=True, description="In the trash", ordering="trashed_at")
    def in_trash(self, conversation):
        return conversation.trashed_at is not None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
