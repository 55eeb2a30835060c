from django.conf import settings
from django.urls import path

from accounts import admin_login, views

urlpatterns = [
    path("api/v1/auth/login", views.login),
    path("api/v1/auth/logout", views.logout),
    path("api/v1/auth/api-key/generate", views.api_key_create),
    path("api/v1/auth/api-key/revoke", views.api_key_delete),
    path("api/v1/auth/verify", views.verify),
    path("api/auth/me", views.me),
    # the operator console's login, limited (admin.site.login behind django-ratelimit)
    path("admin/login/", admin_login.login),
]
if settings.OIDC_ENABLED:  # operators' single sign-on (accounts/sso.py); no route at all when it is off
    from accounts import sso

    urlpatterns += [
        path("admin/oidc/authenticate/", sso.SignOnStart.as_view(), name="oidc_authentication_init"),
        path("admin/oidc/callback/", sso.SignOnCallback.as_view(), name="oidc_authentication_callback"),
    ]
