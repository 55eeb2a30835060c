"""The operator console for accounts: groups, accounts, locks, and key previews (never a secret)."""

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import UserChangeForm, UserCreationForm
from django.utils import timezone

from accounts.models import Account, AccountGroup, ApiKey


@admin.register(AccountGroup)
class AccountGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "api_access", "all_models", "daily_tokens", "weekly_tokens", "monthly_tokens",
                    "remote_servers_allowed", "attachments_per_message"]
    list_filter = ["api_access", "all_models", "remote_servers_allowed"]
    search_fields = ["name"]
    filter_horizontal = ["allowed_models"]


class ApiKeyInline(admin.StackedInline):
    model = ApiKey
    fields = ["preview", "created_at", "expires_at"]
    readonly_fields = fields
    can_delete = True
    extra = 0
    max_num = 0
    verbose_name_plural = "API key (preview only; the key itself is never stored)"


class LockedFilter(admin.SimpleListFilter):
    title = "lock"
    parameter_name = "locked"

    def lookups(self, request, model_admin):
        return [("yes", "Locked now")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(locked_until__gt=timezone.now())
        return queryset


class AccountCreationForm(UserCreationForm):
    class Meta:
        model = Account
        fields = ["email", "full_name", "group", "role"]


class AccountChangeForm(UserChangeForm):
    class Meta:
        model = Account
        fields = "__all__"


@admin.register(Account)
class AccountAdmin(UserAdmin):
    form = AccountChangeForm
    add_form = AccountCreationForm
    ordering = ["email"]
    list_display = ["email", "full_name", "group", "role", "is_active", "is_staff", "locked"]
    list_filter = [LockedFilter, "is_active", "is_staff", "role", "group"]
    search_fields = ["email", "full_name"]
    readonly_fields = ["last_login", "date_joined", "failed_logins", "locked_until"]
    inlines = [ApiKeyInline]
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

    @admin.display(boolean=True, description="Locked")
    def locked(self, account):
        return account.is_locked()

    @admin.action(description="Unlock the selected accounts")
    def unlock_accounts(self, request, queryset):
        count = queryset.update(locked_until=None, failed_logins=0)
        self.message_user(request, f"Unlocked {count} account(s).", messages.SUCCESS)
