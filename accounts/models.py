"""Accounts, their groups, API keys and session tokens.

Secrets are never stored: an API key and a session token are kept as SHA-256 hashes; an API key
also keeps a preview (first 16 and last 8 characters) so the owner and the operator can tell
keys apart.
"""

from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.db import models
from django.utils import timezone

DEFAULT_GROUP = "default"


BUDGET_HELP = "Spend per account in the window, in the installation's currency; -1 = no budget."
# What each member of a group may keep in /v1/files by default: 10 GiB, fifty of the largest batch input files.
FILE_STORAGE_DEFAULT = 10 * 1024 ** 3
OVERRIDE_HELP = "This account's own budget, in place of its group's; empty = the group's; -1 = none."


class AccountGroup(models.Model):
    """What the operator allows per group (spec 1, 8.4, 8.5). A ceiling of -1 means none."""

    name = models.CharField(max_length=100, unique=True)
    api_access = models.BooleanField("API access", default=False, help_text="Members may generate and use API keys.")
    all_models = models.BooleanField(default=True, help_text="Members may use every model.")
    allowed_models = models.ManyToManyField(
        "gateway.Model", blank=True, related_name="groups", help_text="Used when 'all models' is off."
    )
    allowed_aliases = models.ManyToManyField(
        "gateway.Alias", blank=True, related_name="groups",
        help_text="Used when 'all models' is off: these aliases, whatever their deployments' models.",
    )
    daily_tokens = models.BigIntegerField(default=-1, help_text="-1 = no ceiling")
    weekly_tokens = models.BigIntegerField(default=-1, help_text="-1 = no ceiling")
    monthly_tokens = models.BigIntegerField(default=-1, help_text="-1 = no ceiling")
    # Budgets in money per account and window, in settings.CURRENCY; -1 = none. Windows as the
    # token quotas': UTC day, week from Wednesday 14:00, month. An account may have its own (Account).
    daily_budget = models.DecimalField(max_digits=14, decimal_places=4, default=-1, help_text=BUDGET_HELP)
    weekly_budget = models.DecimalField(max_digits=14, decimal_places=4, default=-1, help_text=BUDGET_HELP)
    monthly_budget = models.DecimalField(max_digits=14, decimal_places=4, default=-1, help_text=BUDGET_HELP)
    remote_servers_allowed = models.BooleanField(default=True, help_text="Members may use cloud providers.")
    attachments_per_message = models.PositiveIntegerField(default=10)
    response_cache_ttl = models.PositiveIntegerField(
        "response cache TTL",
        default=0,
        help_text="Seconds a whole, successful chat reply is kept and given again for the same request "
        "(the exact response cache, shared by the group's members); 0 = off.",
    )
    capture_calls = models.BooleanField(
        "keep prompts and replies", default=False,
        help_text="The calls log keeps each call's prompt and reply text too, redacted and cut to "
        "CALL_CAPTURE_MAX_BYTES each, for CALL_CAPTURE_RETENTION_DAYS.",
    )
    guardrails = models.JSONField(
        default=list, blank=True,
        help_text="Checks on what members send to a model and what comes back: a list of items such as "
        '{"check": "pii", "on": "input", "action": "redact"} (see the guardrails guide); empty = none.',
    )
    file_storage_bytes = models.BigIntegerField(
        "file storage (bytes)", default=FILE_STORAGE_DEFAULT,
        help_text="Bytes of files (/v1/files) each member may keep stored at once; -1 = no limit.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AccountManager(BaseUserManager):
    use_in_migrations = True

    def create_user(self, email, password=None, **fields):
        if not email:
            raise ValueError("An account needs an e-mail address.")
        if "group" not in fields and "group_id" not in fields:
            fields["group"], _ = AccountGroup.objects.get_or_create(name=DEFAULT_GROUP)
        account = self.model(email=self.normalize_email(email).lower(), **fields)
        account.set_password(password)
        account.save(using=self._db)
        return account

    def create_superuser(self, email, password=None, **fields):
        fields.setdefault("is_staff", True)
        fields.setdefault("is_superuser", True)
        fields.setdefault("role", Account.Role.ADMIN)
        return self.create_user(email, password, **fields)


class Account(AbstractBaseUser, PermissionsMixin):
    class Role(models.TextChoices):
        USER = "user", "User"
        ADMIN = "admin", "Administrator"

    email = models.EmailField(unique=True)
    full_name = models.CharField(max_length=200, blank=True)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.USER)
    group = models.ForeignKey(AccountGroup, on_delete=models.PROTECT, related_name="accounts")
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False, help_text="May log in to the operator console.")
    date_joined = models.DateTimeField(default=timezone.now)
    failed_logins = models.PositiveIntegerField(default=0, help_text="Consecutive failed logins.")
    locked_until = models.DateTimeField(null=True, blank=True)
    daily_budget = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True, help_text=OVERRIDE_HELP)
    weekly_budget = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True, help_text=OVERRIDE_HELP)
    monthly_budget = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True,
                                         help_text=OVERRIDE_HELP)

    objects = AccountManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS = []

    class Meta:
        ordering = ["email"]

    def __str__(self) -> str:
        return self.email

    def is_locked(self, now=None) -> bool:
        return self.locked_until is not None and self.locked_until > (now or timezone.now())


class ApiKey(models.Model):
    """The one API key of an account (spec 2.1). Generating a new one replaces this row."""

    account = models.OneToOneField(Account, on_delete=models.CASCADE, related_name="api_key")
    key_hash = models.CharField(max_length=64, unique=True)
    preview = models.CharField(max_length=32)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    # moved at most once a minute, off the call's way (accounts/key_use.py)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return self.preview


class SessionToken(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="session_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"session of {self.account_id} until {self.expires_at:%Y-%m-%d %H:%M}"
