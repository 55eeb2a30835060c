"""The management commands that make accounts: createaccount and ensureoperator."""

import io

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Account, AccountGroup
from tests.factories import AccountFactory, AccountGroupFactory

pytestmark = pytest.mark.django_db

GOOD_PASSWORD = "violet-harbour-lantern-42"


def createaccount(monkeypatch, stdin: str, *args: str) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("createaccount", *args, "--password-stdin", stdout=out)
    return out.getvalue()


def test_it_creates_an_account_with_a_hashed_password_and_a_new_group(monkeypatch):
    assert not AccountGroup.objects.filter(name="team").exists()

    out = createaccount(monkeypatch, GOOD_PASSWORD + "\n",
                        "--email", "Ada@Example.Test", "--name", "Ada Lovelace", "--group", "team")

    account = Account.objects.get(email="ada@example.test")
    assert account.full_name == "Ada Lovelace"
    assert account.password != GOOD_PASSWORD
    assert account.check_password(GOOD_PASSWORD)
    assert account.group.name == "team"
    assert account.group.api_access is False
    assert account.role == Account.Role.USER
    assert not account.is_staff and not account.is_superuser
    assert "ada@example.test" in out and "group created" in out


def test_it_gives_a_new_group_api_access_when_asked(monkeypatch):
    createaccount(monkeypatch, GOOD_PASSWORD + "\n",
                  "--email", "bob@example.test", "--group", "api-team", "--api-access")

    assert AccountGroup.objects.get(name="api-team").api_access is True


def test_it_reuses_an_existing_group(monkeypatch):
    existing = AccountGroupFactory(name="team", api_access=True, daily_tokens=1000)

    out = createaccount(monkeypatch, GOOD_PASSWORD + "\n",
                        "--email", "carol@example.test", "--name", "Carol", "--group", "team")

    account = Account.objects.get(email="carol@example.test")
    assert account.group_id == existing.pk
    assert AccountGroup.objects.filter(name="team").count() == 1
    existing.refresh_from_db()
    assert existing.api_access is True and existing.daily_tokens == 1000
    assert "group created" not in out


def test_it_refuses_a_duplicate_email(monkeypatch):
    AccountFactory(email="dup@example.test", full_name="First")

    with pytest.raises(CommandError, match="exists already"):
        createaccount(monkeypatch, GOOD_PASSWORD + "\n", "--email", "DUP@example.test", "--name", "Second")

    assert Account.objects.filter(email="dup@example.test").count() == 1
    assert Account.objects.get(email="dup@example.test").full_name == "First"


def test_it_refuses_an_empty_stdin(monkeypatch):
    with pytest.raises(CommandError, match="No password"):
        createaccount(monkeypatch, "", "--email", "empty@example.test", "--group", "never-made")

    assert not Account.objects.filter(email="empty@example.test").exists()
    assert not AccountGroup.objects.filter(name="never-made").exists()


def test_it_refuses_a_too_short_password(monkeypatch):
    with pytest.raises(CommandError, match="Password refused.*too short"):
        createaccount(monkeypatch, "Xq7!zP2\n", "--email", "short@example.test", "--group", "never-made")

    assert not Account.objects.filter(email="short@example.test").exists()
    assert not AccountGroup.objects.filter(name="never-made").exists()


def test_it_makes_a_staff_superuser_admin_with_staff(monkeypatch):
    createaccount(monkeypatch, GOOD_PASSWORD + "\n", "--email", "boss@example.test", "--staff")

    account = Account.objects.get(email="boss@example.test")
    assert account.is_staff is True
    assert account.is_superuser is True
    assert account.role == Account.Role.ADMIN
    assert account.check_password(GOOD_PASSWORD)


def test_it_creates_the_operator_once_and_then_says_where_to_log_in(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.OPERATOR_EMAIL = "ops@example.test"
    password_file = tmp_path / "operator-password.txt"

    first = io.StringIO()
    call_command("ensureoperator", "--url", "http://gw.example.test:8000/", stdout=first)

    operators = Account.objects.filter(is_superuser=True)
    assert operators.count() == 1
    operator = operators.get()
    assert operator.email == "ops@example.test"
    assert operator.is_staff and operator.role == Account.Role.ADMIN
    password = password_file.read_text().strip()
    assert password
    assert operator.check_password(password)
    assert oct(password_file.stat().st_mode & 0o777) == oct(0o600)
    text = first.getvalue()
    assert "ops@example.test" in text
    assert password in text
    assert "http://gw.example.test:8000/admin/" in text

    second = io.StringIO()
    call_command("ensureoperator", "--url", "http://gw.example.test:8000", stdout=second)

    assert Account.objects.filter(is_superuser=True).count() == 1
    assert Account.objects.count() == 1
    assert password_file.read_text().strip() == password
    again = second.getvalue()
    assert "http://gw.example.test:8000/admin/" in again
    assert "ops@example.test" in again
    assert password not in again


def test_it_leaves_an_existing_account_with_the_operator_email_alone(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.OPERATOR_EMAIL = "ops@example.test"
    existing = AccountFactory(email="ops@example.test")
    out = io.StringIO()
    call_command("ensureoperator", stdout=out)
    assert list(Account.objects.all()) == [existing]
    assert not (tmp_path / "operator-password.txt").exists()
    assert "ops@example.test" in out.getvalue()


def test_api_access_on_an_existing_group_without_it_is_refused_not_ignored(monkeypatch):
    existing = AccountGroupFactory(name="team", api_access=False)

    with pytest.raises(CommandError, match="Group team exists without API access.*nothing was created"):
        createaccount(monkeypatch, GOOD_PASSWORD + "\n", "--email", "dan@example.test", "--group", "team",
                      "--api-access")

    assert not Account.objects.filter(email="dan@example.test").exists()
    existing.refresh_from_db()
    assert existing.api_access is False


def test_api_access_on_an_existing_group_that_has_it_is_satisfied(monkeypatch):
    existing = AccountGroupFactory(name="api-team", api_access=True)

    out = createaccount(monkeypatch, GOOD_PASSWORD + "\n", "--email", "erin@example.test", "--group", "api-team",
                        "--api-access")

    assert Account.objects.get(email="erin@example.test").group_id == existing.pk
    assert "group created" not in out
