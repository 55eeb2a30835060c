"""`GET /api/v1/openapi.json`: the document, without a credential (it describes routes, not data)."""

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




def route_rows(document: dict) -> list[dict]:
    """One row per operation of the document, for the admin page."""
    rows = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            responses = operation.get("responses", {})
            rows.append({
                "method": method.upper(),
                "path": path,
                "summary": operation.get("summary", ""),
                "credential": "session token" if operation.get("security") == [{"session": []}]
                else ("none" if operation.get("security") == [] else "API key or session token"),
                "statuses": ", ".join(sorted(responses)),
                "media": ", ".join(sorted({media for r in responses.values() for media in r.get("content", {})})),
                "body": ", ".join(operation.get("requestBody", {}).get("content", {})),
            })
    return rows


def admin_contract(request):
    """The document rendered in the admin (staff only: wrapped by `admin.site.admin_view`)."""
    from django.contrib import admin
    from django.template.response import TemplateResponse

    doc = cached_document()
    context = {
        **admin.site.each_context(request),
        "title": "API contract (OpenAPI 3.1)",
        "info": doc["info"],
        "openapi_version": doc["openapi"],
        "rows": route_rows(doc),
        "schemas": sorted(doc["components"]["schemas"]),
    }
    return TemplateResponse(request, "admin/openapi.html", context)
