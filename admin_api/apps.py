from django.apps import AppConfig


class AdminApiConfig(AppConfig):
    """The administration API (no models: it writes those of accounts, gateway and routines)."""

    name = "admin_api"
    verbose_name = "Administration API"
