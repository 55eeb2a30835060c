from django.apps import AppConfig


class NativeConfig(AppConfig):
    name = "native"
    default_auto_field = "django.db.models.BigAutoField"
