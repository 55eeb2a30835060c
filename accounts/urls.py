from django.urls import path

from accounts import views

urlpatterns = [
    path("api/v1/auth/login", views.login),
    path("api/v1/auth/logout", views.logout),
    path("api/v1/auth/api-key/generate", views.api_key_create),
    path("api/v1/auth/api-key/revoke", views.api_key_delete),
    path("api/v1/auth/verify", views.verify),
    path("api/auth/me", views.me),
]
