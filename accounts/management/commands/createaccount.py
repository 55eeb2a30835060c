"""Create an account from a script:

    echo "$PASSWORD" | python manage.py createaccount --email a@b.c --name "A B" --group team --password-stdin
"""

import sys

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from accounts.models import Account, AccountGroup


class Command(BaseCommand):
    help = "Create an account (and its group when missing). The password is read from standard input."

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True)
        parser.add_argument("--name", default="", help="Full name.")
        parser.add_argument("--group", default="default", help="Group name; created when missing.")
        parser.add_argument("--role", default=Account.Role.USER, choices=Account.Role.values)
        parser.add_argument("--password-stdin", action="store_true", required=True,
                            help="Read the password from the first line of standard input.")
        parser.add_argument("--api-access", action="store_true",
                            help="Give the group API access when this command creates it. An existing group "
                                 "without API access is refused, not changed: that would open the API to every "
                                 "account in it (change the group in the admin instead).")
        parser.add_argument("--staff", action="store_true", help="Let the account log in to /admin/ as a superuser.")

    def handle(self, *args, **options):
        email = options["email"].strip().lower()
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise CommandError("No password on standard input.")
        if Account.objects.filter(email=email).exists():
            raise CommandError(f"An account with e-mail {email} exists already.")
        candidate = Account(email=email, full_name=options["name"])
        try:
            validate_password(password, candidate)
        except ValidationError as exc:
            raise CommandError("Password refused: " + " ".join(exc.messages)) from None
        with transaction.atomic():
            group, created = AccountGroup.objects.get_or_create(
                name=options["group"], defaults={"api_access": options["api_access"]}
            )
            if options["api_access"] and not group.api_access:
                raise CommandError(
                    f"Group {group.name} exists without API access, and --api-access only applies to a group this "
                    "command creates: nothing was created. Give the group API access in the admin (Account groups) "
                    "if every account in it should have it, or name another group.")
            account = Account.objects.create_user(
                email,
                password,
                full_name=options["name"],
                group=group,
                role=Account.Role.ADMIN if options["staff"] else options["role"],
                is_staff=options["staff"],
                is_superuser=options["staff"],
            )
        note = " (group created)" if created else ""
        self.stdout.write(f"Created account {account.pk} <{account.email}> in group {group.name}{note}.")
