from django.apps import AppConfig


class NativeConfig(AppConfig):
    name = "native"
    verbose_name = "Chat and agents"  # the console's section: profiles, conversations, collections, MCP servers
    default_auto_field = "django.db.models.BigAutoField"
