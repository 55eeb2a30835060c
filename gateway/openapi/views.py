"""`GET /api/v1/openapi.json`: the document, without a credential (it describes routes, not data); and
`/admin/api-contract/`, the same document in Swagger UI for the console's staff."""

from __future__ import annotations

from django.http import JsonResponse

from gateway.openapi import cached_document
from gateway.web.errors import FrameworkError, render_error


def openapi_json(request):
    if request.method not in ("GET", "HEAD"):
        return render_error(request, FrameworkError(405, "Method Not Allowed.", headers={"Allow": "GET"}))
    response = JsonResponse(cached_document(), json_dumps_params={"ensure_ascii": False})
    response["Cache-Control"] = "public, max-age=300"
    return response


# Swagger UI, from the drf-spectacular-sidecar package (its swagger-ui-dist), served by the console's static
# files (WhiteNoise): the page loads nothing from elsewhere.
SWAGGER_UI = "drf_spectacular_sidecar/swagger-ui-dist/"


def admin_contract(request):
    """The document in Swagger UI inside the admin (staff only: wrapped by `admin.site.admin_view`):
    its operations with their schemas, and "Try it out" with an API key given to "Authorize"."""
    from django.contrib import admin
    from django.template.response import TemplateResponse
    from django.templatetags.static import static

    context = {
        **admin.site.each_context(request),
        "title": "API contract",
        "document_url": "/api/v1/openapi.json",
        "swagger_css": static(SWAGGER_UI + "swagger-ui.css"),
        "swagger_js": static(SWAGGER_UI + "swagger-ui-bundle.js"),
    }
    return TemplateResponse(request, "admin/openapi.html", context)
