"""The operator console for accounts: groups, accounts, locks, and each account's API key (its preview and
last use; generated and revoked through accounts/admin_keys.py, the key itself shown once)."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.utils import timezone
from django.utils.html import format_html
from unfold.admin import ModelAdmin
from unfold.forms import AdminPasswordChangeForm, UserChangeForm, UserCreationForm

from accounts.admin_guardrails import GuardrailsFormMixin, as_text
from accounts.admin_keys import AccountKeyAdmin
from accounts.models import Account, AccountGroup
from gateway.console.audit_trail import audit_trail
from gateway.console.fields.money import (
    ACCOUNT_BUDGET_HELP,
    BUDGET_FIELDS,
    BUDGET_WINDOWS,
    MoneyFormMixin,
    budgets_summary,
    currency,
    plain,
)
from gateway.console.fields.no_limit import WORDS, no_limit_field, shown

WINDOWS_HELP = "Per account, in windows of a UTC day, a week from Wednesday 14:00 UTC and a calendar month."
TOKEN_FIELDS = ("daily_tokens", "weekly_tokens", "monthly_tokens")
TOKENS_HELP = f"Tokens per account in the window; empty or “{WORDS}”: no ceiling."
GUARDRAILS_HELP = ("Checks on what the group's members send to a model (input) and what comes back (output): "
                   "pii, secrets, injection, words, model and webhook, each blocking, redacting or only noting "
                   "what it finds, on every surface and every model (the guardrails guide, docs/guardrails.md).")


class AccountGroupForm(MoneyFormMixin, GuardrailsFormMixin, forms.ModelForm):
    class Meta:
        model = AccountGroup
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in TOKEN_FIELDS:
            if name in self.fields:  # not for staff who may only view: every field is read-only then
                self.fields[name] = no_limit_field(self.fields[name], empty_is_no_limit=True, help_text=TOKENS_HELP)
        if "file_storage_bytes" in self.fields:  # a ceiling as the token quotas are: empty or the words, none
            self.fields["file_storage_bytes"] = no_limit_field(self.fields["file_storage_bytes"],
                                                               empty_is_no_limit=True)


def tokens_column(name: str, title: str):
    """A list column of a token ceiling: the number, or "no limit"."""
    @admin.display(description=title, ordering=name)
    def column(group):
        return shown(getattr(group, name), lambda value: f"{value:,}")
    column.__name__ = name.replace("_tokens", "_ceiling")
    return column


@admin.register(AccountGroup)
@audit_trail
class AccountGroupAdmin(ModelAdmin):
    form = AccountGroupForm
    list_display = ["name", "api_access", "all_models", tokens_column("daily_tokens", "Daily tokens"),
                    tokens_column("weekly_tokens", "Weekly tokens"), tokens_column("monthly_tokens", "Monthly tokens"),
                    "budgets", "remote_servers_allowed", "attachments_per_message", "response_cache_ttl",
                    "guardrails_checks"]
    list_filter = ["api_access", "all_models", "remote_servers_allowed"]
    search_fields = ["name"]
    filter_horizontal = ["allowed_models", "allowed_aliases"]
    readonly_fields = ["guardrails_shown"]

    def get_fieldsets(self, request, obj=None):
        """The token quotas and the budgets side by side, in a section named with the currency; the guardrails
        last, as text without the webhooks' secrets for staff who may only view them."""
        limits = [*TOKEN_FIELDS, *BUDGET_FIELDS]
        guardrails = "guardrails" if self.has_change_permission(request, obj) else "guardrails_shown"
        others = [name for name in self.get_fields(request, obj)
                  if name not in [*limits, "guardrails", "guardrails_shown"]]
        return [(None, {"fields": others}),
                (f"Token quotas and budgets ({currency()})", {"fields": limits, "description": f"{WINDOWS_HELP} "
                 "Reaching one refuses the account's calls until its window ends; an account may have budgets of "
                 "its own."}),
                ("Guardrails", {"fields": [guardrails], "description": GUARDRAILS_HELP})]

    @admin.display(description="Budgets")
    def budgets(self, group):
        return budgets_summary(group)

    @admin.display(description="Guardrails")
    def guardrails_shown(self, group):
        """The list as the editors' field shows it (YAML, without secrets), for staff who may only view."""
        return format_html("<pre>{}</pre>", as_text(group.guardrails)) if group.guardrails else "none"

    @admin.display(description="Guardrails")
    def guardrails_checks(self, group):
        """The checks' names in order ("pii, secrets"), or "none"."""
        names = [str(item.get("check")) for item in group.guardrails or [] if isinstance(item, dict)]
        return ", ".join(names) or "none"


class LockedFilter(admin.SimpleListFilter):
    title = "lock"
    parameter_name = "locked"

    def lookups(self, request, model_admin):
        return [("yes", "Locked now")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(locked_until__gt=timezone.now())
        return queryset


class EmailAsStoredMixin:
    """The e-mail address as the account manager stores it and login looks it up: in lower case (an address
    written "Ann@Example.org" could never log in otherwise), checked for uniqueness as such."""

    def clean_email(self):
        return Account.objects.normalize_email(self.cleaned_data["email"]).lower()


class AccountCreationForm(EmailAsStoredMixin, UserCreationForm):
    class Meta:
        model = Account
        fields = ["email", "full_name", "group", "role"]


class AccountChangeForm(EmailAsStoredMixin, MoneyFormMixin, UserChangeForm):
    money_help = dict.fromkeys(BUDGET_FIELDS, ACCOUNT_BUDGET_HELP)
    empty_budget_is_no_limit = False  # empty: the group's
    empty_budget_is = "the group's"

    class Meta:
        model = Account
        fields = "__all__"


@admin.register(Account)
@audit_trail
class AccountAdmin(AccountKeyAdmin, UserAdmin, ModelAdmin):
    form = AccountChangeForm
    add_form = AccountCreationForm
    change_password_form = AdminPasswordChangeForm
    ordering = ["email"]
    list_display = ["email", "full_name", "group", "role", "is_active", "is_staff", "locked", "key_last_used"]
    list_filter = [LockedFilter, "is_active", "is_staff", "role", "group"]
    search_fields = ["email", "full_name"]
    readonly_fields = ["last_login", "date_joined", "failed_logins", "locked_until", "api_key_panel"]
    actions = ["unlock_accounts"]
    fieldsets = [
        (None, {"fields": ["email", "password"]}),
        ("Profile", {"fields": ["full_name", "group", "role"]}),
        ("Status", {"fields": ["is_active", "is_staff", "is_superuser", "failed_logins", "locked_until"]}),
        ("Dates", {"fields": ["last_login", "date_joined"]}),
    ]
    add_fieldsets = [
        (None, {"classes": ["wide"], "fields": ["email", "full_name", "group", "role", "password1", "password2"]}),
    ]
    filter_horizontal = []

    def get_fieldsets(self, request, obj=None):
        """The account's own budgets after its status, with its group's beside them."""
        if obj is None:
            return super().get_fieldsets(request, obj)
        group = obj.group
        described = ", ".join(f"{window} {shown(getattr(group, name), plain)}"
                              for name, window in BUDGET_WINDOWS.items())
        return [*self.fieldsets, ("API key", {"fields": ["api_key_panel"]}), (f"Budgets ({currency()})", {
            "fields": list(BUDGET_FIELDS),
            # the admin shows a description as markup: the group's name is escaped
            "description": format_html("{} Empty: the group's ({}: {}); “{}”: none, whatever the group's; an "
                                       "amount: this account's own.", WINDOWS_HELP, group.name, described, WORDS)})]

    @admin.display(boolean=True, description="Locked")
    def locked(self, account):
        return account.is_locked()

    @admin.action(description="Unlock the selected accounts")
    def unlock_accounts(self, request, queryset):
        count = queryset.update(locked_until=None, failed_logins=0)
        self.message_user(request, f"Unlocked {count} account(s).", messages.SUCCESS)


# Django's permission groups: the console assigns none (an operator is a superuser, or staff with permissions
# of their own), so their page is not offered beside the account groups
# (docs/decisions/0116-console-theme-home-and-pages.md, "Branding and names").
admin.site.unregister(Group)
