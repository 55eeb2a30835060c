"""The console's account forms (accounts/admin.py), narrowed to the fields the API writes: the creation
form's e-mail, password and its validators, the change form's budgets (an account's own, empty: its
group's; -1: none whatever the group's), and the model's own checks through both."""

from __future__ import annotations

from accounts.admin import AccountChangeForm, AccountCreationForm
from gateway.console.fields.money import BUDGET_FIELDS, MoneyFormMixin

PROFILE_FIELDS = ("email", "full_name", "group", "role", "is_active", "is_staff", *BUDGET_FIELDS)


class AccountCreateForm(MoneyFormMixin, AccountCreationForm):
    """As the console adds an account, with its status and budgets set in the same step."""

    money_help = AccountChangeForm.money_help
    empty_budget_is_no_limit = AccountChangeForm.empty_budget_is_no_limit
    empty_budget_is = AccountChangeForm.empty_budget_is

    class Meta(AccountCreationForm.Meta):
        fields = list(PROFILE_FIELDS)


class AccountUpdateForm(AccountChangeForm):
    """As the console changes an account, without its password, permissions and login bookkeeping."""

    class Meta(AccountChangeForm.Meta):
        fields = list(PROFILE_FIELDS)
