# The usage console's tables: the daily roll-up of the usage records, kept by triggers,
# and the daily counts of failed model calls.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# PostgreSQL: statement-level triggers with transition tables, so a batch of records (the usage
# drainer's INSERT of up to USAGE_BATCH_SIZE rows) updates each day/account/model row once. A
# record skipped by ON CONFLICT DO NOTHING is not in `new_rows`. The rows are upserted in key
# order, so two writers meeting on the same rows lock them in the same order (no deadlock).
POSTGRESQL = """
CREATE FUNCTION gateway_usage_daily_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE gateway_usagedaily AS d
       SET calls = d.calls - g.calls, input_tokens = d.input_tokens - g.input_tokens,
           output_tokens = d.output_tokens - g.output_tokens
      FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, account_id, model, count(*) AS calls,
                   sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
              FROM old_rows GROUP BY 1, 2, 3) AS g
     WHERE d.day = g.day AND d.account_id = g.account_id AND d.model = g.model;
    DELETE FROM gateway_usagedaily AS d
     WHERE d.calls <= 0 AND (d.day, d.account_id, d.model) IN (
           SELECT (created_at AT TIME ZONE 'UTC')::date, account_id, model FROM old_rows);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO gateway_usagedaily AS d (day, account_id, model, calls, input_tokens, output_tokens)
    SELECT (created_at AT TIME ZONE 'UTC')::date, account_id, model, count(*), sum(input_tokens), sum(output_tokens)
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (day, account_id, model) DO UPDATE
       SET calls = d.calls + excluded.calls, input_tokens = d.input_tokens + excluded.input_tokens,
           output_tokens = d.output_tokens + excluded.output_tokens;
  END IF;
  RETURN NULL;
END $$;
CREATE FUNCTION gateway_usage_daily_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM gateway_usagedaily;  -- not TRUNCATE: a TRUNCATE of both tables at once (Django's flush) is running
  RETURN NULL;
END $$;
CREATE TRIGGER gateway_usage_daily_insert AFTER INSERT ON gateway_usagerecord
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION gateway_usage_daily_apply();
CREATE TRIGGER gateway_usage_daily_update AFTER UPDATE ON gateway_usagerecord
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION gateway_usage_daily_apply();
CREATE TRIGGER gateway_usage_daily_delete AFTER DELETE ON gateway_usagerecord
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION gateway_usage_daily_apply();
CREATE TRIGGER gateway_usage_daily_truncate AFTER TRUNCATE ON gateway_usagerecord
  FOR EACH STATEMENT EXECUTE FUNCTION gateway_usage_daily_clear();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS gateway_usage_daily_insert ON gateway_usagerecord;
DROP TRIGGER IF EXISTS gateway_usage_daily_update ON gateway_usagerecord;
DROP TRIGGER IF EXISTS gateway_usage_daily_delete ON gateway_usagerecord;
DROP TRIGGER IF EXISTS gateway_usage_daily_truncate ON gateway_usagerecord;
DROP FUNCTION IF EXISTS gateway_usage_daily_apply();
DROP FUNCTION IF EXISTS gateway_usage_daily_clear();
"""

# SQLite (the embedded default) has row-level triggers only; its datetimes are UTC text.
_ADD = """INSERT INTO gateway_usagedaily (day, account_id, model, calls, input_tokens, output_tokens)
    VALUES (date(NEW.created_at), NEW.account_id, NEW.model, 1, NEW.input_tokens, NEW.output_tokens)
    ON CONFLICT (day, account_id, model) DO UPDATE SET calls = calls + 1,
       input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens;"""
_SUBTRACT = """UPDATE gateway_usagedaily SET calls = calls - 1, input_tokens = input_tokens - OLD.input_tokens,
       output_tokens = output_tokens - OLD.output_tokens
     WHERE day = date(OLD.created_at) AND account_id = OLD.account_id AND model = OLD.model;
    DELETE FROM gateway_usagedaily
     WHERE day = date(OLD.created_at) AND account_id = OLD.account_id AND model = OLD.model AND calls <= 0;"""
SQLITE = [
    f"CREATE TRIGGER gateway_usage_daily_insert AFTER INSERT ON gateway_usagerecord BEGIN {_ADD} END",
    f"CREATE TRIGGER gateway_usage_daily_update AFTER UPDATE ON gateway_usagerecord BEGIN {_SUBTRACT} {_ADD} END",
    f"CREATE TRIGGER gateway_usage_daily_delete AFTER DELETE ON gateway_usagerecord BEGIN {_SUBTRACT} END",
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS gateway_usage_daily_{op}" for op in ("insert", "update", "delete")]

BACKFILL = {
    "postgresql": """INSERT INTO gateway_usagedaily (day, account_id, model, calls, input_tokens, output_tokens)
        SELECT (created_at AT TIME ZONE 'UTC')::date, account_id, model, count(*), sum(input_tokens), sum(output_tokens)
          FROM gateway_usagerecord GROUP BY 1, 2, 3""",
    "sqlite": """INSERT INTO gateway_usagedaily (day, account_id, model, calls, input_tokens, output_tokens)
        SELECT date(created_at), account_id, model, count(*), sum(input_tokens), sum(output_tokens)
          FROM gateway_usagerecord GROUP BY 1, 2, 3""",
}


def install_triggers(apps, schema_editor):
    """The triggers, then the records already there. In one transaction: creating a trigger locks
    the records' table until the commit, so a record written meanwhile is counted exactly once."""
    vendor = schema_editor.connection.vendor
    if vendor not in BACKFILL:
        raise RuntimeError(f"the usage roll-up has no triggers for {vendor}")
    with schema_editor.connection.cursor() as cursor:
        for statement in [POSTGRESQL] if vendor == "postgresql" else SQLITE:
            cursor.execute(statement)
        cursor.execute(BACKFILL[vendor])


def remove_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for statement in [POSTGRESQL_DROP] if vendor == "postgresql" else SQLITE_DROP:
            cursor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0006_usage_record_key'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='CallFailureDaily',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('model', models.CharField(max_length=300)),
                ('kind', models.CharField(choices=[('fell_through', 'Fell through'), ('chain_failed', 'Chain failed'), ('refused', 'Refused')], max_length=16)),
                ('count', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('day', 'model', 'kind'), name='call_failure_daily_key')],
            },
        ),
        migrations.CreateModel(
            name='UsageDaily',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('model', models.CharField(max_length=300)),
                ('calls', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('account', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'usage per day',
                'indexes': [models.Index(fields=['account', 'day'], name='usage_daily_account')],
                'constraints': [models.UniqueConstraint(fields=('day', 'account', 'model'), name='usage_daily_key')],
            },
        ),
        migrations.RunPython(install_triggers, remove_triggers),
    ]
