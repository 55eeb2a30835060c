"""The console's "Files": every account's files (`/v1/files` uploads and what batches write), newest first,
filtered by purpose, searched by id (exact), name or an account's e-mail; a file's page shows its record. Nothing
is edited here (a file is made by its account, or by a batch); a file deleted here goes as the API deletes one,
bytes with the row (gateway/files/store.py `delete_file`), from its page's Delete or the list's action."""

from __future__ import annotations

from django.contrib import admin
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.timezone import localtime
from unfold.admin import ModelAdmin

from gateway.files import store
from gateway.models import StoredFile


def shown(moment) -> str:
    return date_format(localtime(moment), "DATETIME_FORMAT")  # the console's one format


@admin.register(StoredFile)
class StoredFileAdmin(ModelAdmin):
    list_display = ["id", "account", "filename", "purpose", "size", "created_at", "expiry"]
    list_filter = ["purpose"]
    list_select_related = ["account"]
    list_per_page = 50
    ordering = ["-created_at"]
    search_fields = ["=id", "filename", "account__email"]
    search_help_text = "A file's id (exact), a part of its name, or of its account's e-mail address."
    fields = readonly_fields = ["id", "account", "filename", "purpose", "size", "bytes", "created_at", "expiry",
                                "storage_name"]

    @admin.display(description="Size", ordering="bytes")
    def size(self, stored: StoredFile):
        """Human-readable (1.5 KB for 1,536 bytes); the exact count in its tooltip, and on the page under it."""
        return format_html('<span class="file-size whitespace-nowrap" title="{} bytes">{}</span>',
                           f"{stored.bytes:,}", filesizeformat(stored.bytes))

    @admin.display(description="Expires", ordering="expires_at")
    def expiry(self, stored: StoredFile):
        """When it goes; a file past it is gone to its account already, and the hourly sweep removes it."""
        if stored.expires_at is None:
            return "Never (kept until deleted)"
        if stored.expires_at <= timezone.now():
            return format_html('{} <span class="file-expired">(expired: removed at the next sweep)</span>',
                               shown(stored.expires_at))
        return shown(stored.expires_at)

    def has_add_permission(self, request):  # files are uploaded through the API, or written by batches
        return False

    def has_change_permission(self, request, obj=None):  # nothing on the page can be changed: no Save
        return False

    def delete_model(self, request, obj: StoredFile) -> None:
        store.delete_file(obj)

    def delete_queryset(self, request, queryset) -> None:
        """The list's "Delete selected": each file as the API deletes it, its bytes once its row is gone."""
        for stored in queryset:
            store.delete_file(stored)
