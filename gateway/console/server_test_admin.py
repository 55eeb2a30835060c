"""The model server page's "Test connection" button: a POST with the CSRF token, for
staff who may change servers, that makes a real call to one of the server's models
(gateway/console/server_check.py) and comes back to the page with the answer or the exact error as
its message. It tests the server as saved."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from gateway.console.server_check import connection_test
from gateway.console.styles import BUTTON

TEST_FIELD = "connection_test"


class ServerTestAdmin:
    """Mixed into the model server admin, before its ModelAdmin base."""

    def get_urls(self):
        return [path("<path:object_id>/test-connection/",
                     self.admin_site.admin_view(require_POST(self.connection_test_view)),
                     name="gateway_modelserver_test_connection"),
                *super().get_urls()]

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, TEST_FIELD] if obj is not None else fields

    def connection_test(self, server):
        """The button: it sends the page's form (with its CSRF token) to the test's URL; the test uses
        the server as saved, not the form's unsaved changes."""
        if server is None or server.pk is None:
            return "-"
        url = reverse("admin:gateway_modelserver_test_connection", args=[server.pk])
        return format_html('<button type="submit" class="{}" id="test-connection" formaction="{}" '
                           'formmethod="post" formnovalidate>Test connection</button>'
                           '<div class="help mt-2">A real chat call (embeddings for a server with embedding models '
                           'only) to one of its models, with the saved settings: save a change first.</div>',
                           BUTTON, url)

    connection_test.short_description = "Connection"

    def connection_test_view(self, request, object_id):
        server = self.get_object(request, unquote(object_id))
        if server is None:
            raise Http404("No such model server.")
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        outcome = connection_test(row=server)
        self.message_user(request, outcome.message, messages.SUCCESS if outcome.ok else messages.ERROR)
        return HttpResponseRedirect(reverse("admin:gateway_modelserver_change", args=[server.pk]))
