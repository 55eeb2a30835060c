from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    # before the admin: it holds the admin's login, limited per address and per account
    path("", include("accounts.urls")),
    path("admin/", admin.site.urls),
    path("", include("native.urls")),
    path("", include("compat.urls")),
    path("", include("routines.urls")),
    path("", include("routines.channel_urls")),
]

handler400 = "gateway.views.bad_request"
handler404 = "gateway.views.not_found"
handler500 = "gateway.views.server_error"
