# A usage record answered from the response cache, and an index of those records alone
# for the usage console's cache hits. The column keeps a database default, so a usage writer of the
# release before (still running mid-deploy) inserts its records as not cached.
#
# SQLite cannot add a NOT NULL column with ALTER TABLE here, so Django remakes the records' table,
# which drops the usage roll-up's triggers (migration 0007): they are put back after (and, going
# back, after the column is removed the same way). No backfill: the roll-up's rows were not touched.

import importlib

from django.db import migrations, models

usage_console = importlib.import_module("gateway.migrations.0007_usage_console")


def reinstall_sqlite_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        for statement in [*usage_console.SQLITE_DROP, *usage_console.SQLITE]:
            cursor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0008_server_field_translation'),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, reinstall_sqlite_triggers),
        migrations.AddField(
            model_name='usagerecord',
            name='cached',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddIndex(
            model_name='usagerecord',
            index=models.Index(condition=models.Q(('cached', True)), fields=['created_at'], name='usage_cached_time'),
        ),
        migrations.RunPython(reinstall_sqlite_triggers, migrations.RunPython.noop),
    ]
