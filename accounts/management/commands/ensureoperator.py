"""Make the operator account on the first start of the embedded defaults, and say how to log in."""

import os
import secrets
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.models import Account, AccountGroup


class Command(BaseCommand):
    help = "Create the operator account when no operator exists; print how to log in to /admin/."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="Where the service listens.")

    def handle(self, *args, **options):
        email = settings.OPERATOR_EMAIL
        password_file = settings.VAR_DIR / "operator-password.txt"
        admin_url = options["url"].rstrip("/") + "/admin/"
        if Account.objects.filter(is_superuser=True).exists() or Account.objects.filter(email=email).exists():
            self.stdout.write(
                f"Operator console: {admin_url} (operator: {email}; first password in {password_file}, "
                f"or set one with `{_python()} manage.py changepassword EMAIL`)."
            )
            return
        group, _ = AccountGroup.objects.get_or_create(name="operators", defaults={"api_access": True})
        password = secrets.token_urlsafe(15)
        Account.objects.create_superuser(email, password, full_name="Operator", group=group)
        password_file.unlink(missing_ok=True)
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(password + "\n")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Created the operator account.",
                    f"  Log in to {admin_url}",
                    f"  e-mail:   {email}",
                    f"  password: {password}",
                    f"  (kept in {password_file}; change it with `{_python()} manage.py changepassword {email}`)",
                    "",
                ]
            )
        )


def _python() -> str:
    """The Python that has Django, as the operator types it: `.venv/bin/python` from the repository
    (a bare `python` there is the system's, without Django)."""
    here = os.path.relpath(sys.executable)
    return sys.executable if here.startswith("..") else here
