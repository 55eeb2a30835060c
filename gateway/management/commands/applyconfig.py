"""Apply the operator's configuration file (docs/configuration.md):

    python manage.py applyconfig gateway.yaml [--dry-run]
"""

from django.core.management.base import BaseCommand, CommandError

from gateway.registry.config_file import ConfigError, apply_config_file


class Command(BaseCommand):
    help = ("Create or update model servers, models, fallbacks, the default model and account groups from a "
            "YAML file, in one transaction. Nothing is deleted; running it again changes nothing.")

    def add_arguments(self, parser):
        parser.add_argument("file", help="The YAML configuration file.")
        parser.add_argument("--dry-run", action="store_true", help="Check the file and report what would change.")

    def handle(self, *args, **options):
        path = options["file"]
        try:
            summary = apply_config_file(path, dry_run=options["dry_run"])
        except ConfigError as exc:
            raise CommandError(f"{path}: {exc}") from None
        for line in summary.lines():
            self.stdout.write(line)
        if options["dry_run"]:
            self.stdout.write("Dry run: nothing was written.")
        elif summary.changed:
            self.stdout.write(self.style.SUCCESS(f"Applied {path}."))
        else:
            self.stdout.write(f"Everything unchanged: the database already matches {path}.")
