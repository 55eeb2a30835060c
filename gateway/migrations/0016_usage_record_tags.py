# The tags of the call a usage record metered (OpenAI's `metadata`, or Anthropic's `metadata.user_id`,
# as the calls log has them: migration 0015), for the usage console's tag filter and its CSV. The usage
# console's figures come from the records (the daily roll-up holds no tags), so the tags go on the record
# itself: a call's row in the calls log is swept after CALL_LOG_RETENTION_DAYS, its usage is not. The
# column keeps a database default, so a usage writer of the release before (still running mid-deploy)
# inserts records without tags. No backfill: the records written before have none.
#
# SQLite remakes the records' table to add a NOT NULL column, and will not rename a table a trigger
# names: the roll-up's triggers (migration 0011's) are dropped first and made again after (going back,
# the same around the column's removal).

import importlib

from django.db import migrations, models

usage_console = importlib.import_module("gateway.migrations.0007_usage_console")
prices_and_cost = importlib.import_module("gateway.migrations.0011_prices_and_cost")


def sqlite_no_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        with schema_editor.connection.cursor() as cursor:
            for statement in usage_console.SQLITE_DROP:
                cursor.execute(statement)


def sqlite_cost_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        with schema_editor.connection.cursor() as cursor:
            for statement in prices_and_cost.SQLITE:
                cursor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0015_call_tags'),
    ]

    operations = [
        migrations.RunPython(sqlite_no_triggers, sqlite_cost_triggers),
        migrations.AddField(
            model_name='usagerecord',
            name='tags',
            field=models.JSONField(blank=True, db_default={}, default=dict),
        ),
        migrations.RunPython(sqlite_cost_triggers, sqlite_no_triggers),
    ]
