from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from gateway.console.playground.page import playground_page
from gateway.console.playground.reply import playground_reply
from gateway.openapi.views import admin_contract, openapi_json
from gateway.ops import health, metrics_view

urlpatterns = [
    # probes first: no credential, no ceiling, no console middleware (gateway/ops/health.py)
    path("livez", health.livez, name="livez"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view.metrics, name="metrics"),  # Prometheus (gateway/ops/metrics_view.py)
    # before the admin: it holds the admin's login, limited per address and per account
    path("", include("accounts.urls")),
    path("admin/api-contract/", admin.site.admin_view(admin_contract), name="admin-api-contract"),
    # the playground: its page, and its reply streamed to the page (staff checked by the view itself: it is async)
    path("admin/playground/", admin.site.admin_view(playground_page), name="admin-playground"),
    path("admin/playground/reply", playground_reply, name="admin-playground-reply"),
    path("admin/", admin.site.urls),
    # a browser's ways in: the root and the console without its slash (APPEND_SLASH is off) lead to the console
    path("", RedirectView.as_view(pattern_name="admin:index"), name="root"),
    path("admin", RedirectView.as_view(pattern_name="admin:index")),
    # the account holders' own pages (account_pages/): a session of their own, no staff right
    path("account/", include("account_pages.urls")),
    path("account", RedirectView.as_view(pattern_name="account:home")),
    path("api/v1/openapi.json", openapi_json),
    path("", include("admin_api.urls")),  # /api/v1/admin/: staff session tokens only
    path("", include("native.urls")),
    path("", include("compat.urls")),
    path("", include("routines.urls")),
    path("", include("routines.channel_urls")),
]

handler400 = "gateway.web.fallback.bad_request"
# An HTML page in the console's theme for a browser under the console; the API's answers otherwise
# (gateway/console/theme/error_pages.py hands those to gateway/web/fallback.py).
handler404 = "gateway.console.theme.error_pages.not_found"
handler500 = "gateway.console.theme.error_pages.server_error"
