"""The routine page's webhook secret: whether events must be signed, and "Rotate secret".

Rotating is a page that says what it will do, then a POST with the CSRF token, for staff who may
change the routine, through the API's own service (routines/routine_writes.py
`routine_rotate_secret`, as `POST /api/v1/routines/{id}/rotate-secret`): the old secret is
refused from the next event on. The new secret is shown once, on the answer to that POST
(Cache-Control: no-store), and never again: the page itself shows only whether there is one. The
admin's history records the rotation, never the secret."""

from __future__ import annotations

from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from gateway.console.styles import BUTTON, look
from routines.models import Routine
from routines.routine_writes import routine_rotate_secret

CONFIRM_TEMPLATE = "admin/console_confirm.html"
SHOWN_TEMPLATE = "admin/routines/routine/secret_shown.html"


class RoutineSecretAdmin:
    """Mixed into the routine admin, before its ModelAdmin base."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/secret/rotate/", wrap(require_GET(self.secret_rotate_page)),
                 name="routines_routine_secret_rotate"),
            path("<path:object_id>/secret/rotate/confirm/", wrap(require_POST(self.secret_rotate_view)),
                 name="routines_routine_secret_rotate_confirm"),
            *super().get_urls(),
        ]

    def webhook_secret_state(self, routine):
        if routine is None or routine.pk is None:
            return "-"
        if routine.webhook_secret:
            scheme = ("Standard Webhooks signatures (webhook-id, webhook-timestamp, webhook-signature)"
                      if routine.webhook_signature_scheme == Routine.SignatureScheme.STANDARD
                      else "an HMAC-SHA256 of the body in X-Svc-Signature (or X-Hub-Signature-256)")
            state, label = f"Signed: each event must carry {scheme}; others are refused (401).", "Rotate secret"
        else:
            state, label = ("Unsigned: anyone who knows the URL can start the routine. A secret makes every event "
                            "carry a signature."), "Add a secret"
        if not getattr(routine, "page_may_change", False):
            return state
        url = reverse("admin:routines_routine_secret_rotate", args=[routine.pk])
        return format_html('<div class="mb-2" id="webhook-secret-state">{}</div><a class="{}" id="secret-rotate" '
                           'href="{}">{}</a>', state, BUTTON, url, label)

    webhook_secret_state.short_description = "Signature"

    def secret_rotate_page(self, request, object_id):
        """GET: what rotating does, and the form that does it."""
        routine = self._routine_to_change(request, object_id)  # RoutinePageAdmin's
        lines = ["A new secret is made and shown once, on the next page: copy it there and give it to the sender."]
        if routine.webhook_secret:
            lines.insert(0, "The current secret stops working at once: every event signed with it is refused (401) "
                            "until the sender signs with the new one.")
        else:
            lines.insert(0, "The webhook is unsigned now: from then on every event must be signed with the new "
                            "secret, and unsigned ones are refused (401).")
        back = reverse("admin:routines_routine_change", args=[routine.pk])
        context = {**self.admin_site.each_context(request), "opts": self.opts, "object": routine, "look": look(),
                   "title": f"Rotate the webhook secret of “{routine.name}”", "lines": lines,
                   "submit": "Rotate secret", "submit_id": "secret-rotate-confirm",
                   "danger": bool(routine.webhook_secret),
                   "action": reverse("admin:routines_routine_secret_rotate_confirm", args=[routine.pk]),
                   "refusal": None, "back": back}
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)

    def secret_rotate_view(self, request, object_id):
        """POST: the new secret, shown whole on the answer and nowhere else."""
        routine = self._routine_to_change(request, object_id)  # RoutinePageAdmin's
        had = bool(routine.webhook_secret)
        secret = routine_rotate_secret(routine=routine)
        self.log_change(request, routine, "Rotated the webhook secret" if had else "Added a webhook secret")
        context = {**self.admin_site.each_context(request), "opts": self.opts, "object": routine, "look": look(),
                   "title": f"The new webhook secret of “{routine.name}”", "secret": secret, "replaced": had,
                   "back": reverse("admin:routines_routine_change", args=[routine.pk])}
        response = TemplateResponse(request, SHOWN_TEMPLATE, context)
        response["Cache-Control"] = "no-store"  # the secret is on this page: never kept by the browser
        return response
