from django.apps import AppConfig


class AccountPagesConfig(AppConfig):
    """The account holders' own pages at /account/: views, templates and a stylesheet, no models."""

    name = "account_pages"
    verbose_name = "Account pages"
