from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
    # the console's section: accounts and their groups ("Accounts › Accounts" said nothing in a breadcrumb)
    verbose_name = "Access"

    def ready(self) -> None:
        from accounts.principal_cache import connect_signals

        connect_signals()
