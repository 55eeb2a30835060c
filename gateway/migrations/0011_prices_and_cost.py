# Prices and the cost of a call: prices per million tokens on models and alias deployments,
# the provider's cached input tokens and the cost on each usage record (integer COST_UNITS,
# gateway/registry/prices.py), and the cost added up in the daily roll-up, whose triggers (migration
# 0007) are replaced by ones that carry it. Both new record columns keep a database default, so a
# usage writer of the release before (still running mid-deploy) inserts records costing nothing.
#
# SQLite remakes both tables to add a NOT NULL column, and will not rename a table a trigger names: its
# triggers are dropped first and the new ones made after the columns (going back, 0007's). No backfill:
# the records written before cost nothing.

import importlib

import django.core.validators
from django.db import migrations, models

usage_console = importlib.import_module("gateway.migrations.0007_usage_console")

POSTGRESQL = """
CREATE OR REPLACE FUNCTION gateway_usage_daily_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE gateway_usagedaily AS d
       SET calls = d.calls - g.calls, input_tokens = d.input_tokens - g.input_tokens,
           output_tokens = d.output_tokens - g.output_tokens, cost_units = d.cost_units - g.cost_units
      FROM (SELECT (created_at AT TIME ZONE 'UTC')::date AS day, account_id, model, count(*) AS calls,
                   sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
                   sum(cost_units) AS cost_units
              FROM old_rows GROUP BY 1, 2, 3) AS g
     WHERE d.day = g.day AND d.account_id = g.account_id AND d.model = g.model;
    DELETE FROM gateway_usagedaily AS d
     WHERE d.calls <= 0 AND (d.day, d.account_id, d.model) IN (
           SELECT (created_at AT TIME ZONE 'UTC')::date, account_id, model FROM old_rows);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') THEN
    INSERT INTO gateway_usagedaily AS d (day, account_id, model, calls, input_tokens, output_tokens, cost_units)
    SELECT (created_at AT TIME ZONE 'UTC')::date, account_id, model, count(*), sum(input_tokens), sum(output_tokens),
           sum(cost_units)
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (day, account_id, model) DO UPDATE
       SET calls = d.calls + excluded.calls, input_tokens = d.input_tokens + excluded.input_tokens,
           output_tokens = d.output_tokens + excluded.output_tokens, cost_units = d.cost_units + excluded.cost_units;
  END IF;
  RETURN NULL;
END $$;
"""
POSTGRESQL_BACK = usage_console.POSTGRESQL.split("CREATE FUNCTION gateway_usage_daily_clear()")[0].replace(
    "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")

_ADD = """INSERT INTO gateway_usagedaily (day, account_id, model, calls, input_tokens, output_tokens, cost_units)
    VALUES (date(NEW.created_at), NEW.account_id, NEW.model, 1, NEW.input_tokens, NEW.output_tokens, NEW.cost_units)
    ON CONFLICT (day, account_id, model) DO UPDATE SET calls = calls + 1,
       input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
       cost_units = cost_units + excluded.cost_units;"""
_SUBTRACT = """UPDATE gateway_usagedaily SET calls = calls - 1, input_tokens = input_tokens - OLD.input_tokens,
       output_tokens = output_tokens - OLD.output_tokens, cost_units = cost_units - OLD.cost_units
     WHERE day = date(OLD.created_at) AND account_id = OLD.account_id AND model = OLD.model;
    DELETE FROM gateway_usagedaily
     WHERE day = date(OLD.created_at) AND account_id = OLD.account_id AND model = OLD.model AND calls <= 0;"""
SQLITE = [
    f"CREATE TRIGGER gateway_usage_daily_insert AFTER INSERT ON gateway_usagerecord BEGIN {_ADD} END",
    f"CREATE TRIGGER gateway_usage_daily_update AFTER UPDATE ON gateway_usagerecord BEGIN {_SUBTRACT} {_ADD} END",
    f"CREATE TRIGGER gateway_usage_daily_delete AFTER DELETE ON gateway_usagerecord BEGIN {_SUBTRACT} END",
]


def cost_triggers(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for statement in [POSTGRESQL] if schema_editor.connection.vendor == "postgresql" else SQLITE:
            cursor.execute(statement)


def token_triggers_back(apps, schema_editor):
    """Going back: on PostgreSQL 0007's function again, before the cost columns it would name go; on
    SQLite no trigger while the tables are remade (`sqlite_token_triggers` puts 0007's back after)."""
    with schema_editor.connection.cursor() as cursor:
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute(POSTGRESQL_BACK)
        else:
            for statement in usage_console.SQLITE_DROP:
                cursor.execute(statement)


def sqlite_no_triggers(apps, schema_editor):
    """SQLite remakes both tables to add their columns, and refuses to rename one that a trigger names."""
    if schema_editor.connection.vendor == "sqlite":
        with schema_editor.connection.cursor() as cursor:
            for statement in usage_console.SQLITE_DROP:
                cursor.execute(statement)


def sqlite_token_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        with schema_editor.connection.cursor() as cursor:
            for statement in usage_console.SQLITE:
                cursor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0010_merge_aliases_usage_record_cached'),
    ]

    operations = [
        migrations.RunPython(sqlite_no_triggers, sqlite_token_triggers),
        migrations.AddField(
            model_name='aliasdeployment',
            name='cached_input_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million tokens through this alias; empty = the model's own price.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='aliasdeployment',
            name='input_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million tokens through this alias; empty = the model's own price.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='aliasdeployment',
            name='output_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million tokens through this alias; empty = the model's own price.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='model',
            name='cached_input_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million input tokens read from the provider's prompt cache; empty = the input price.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='model',
            name='input_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million input tokens, in the installation's currency; empty = no price (costs nothing).", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='model',
            name='output_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text='Per million output tokens; empty = no price.', max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='usagedaily',
            name='cost_units',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='usagerecord',
            name='cached_input_tokens',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='usagerecord',
            name='cost_units',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(cost_triggers, token_triggers_back),
    ]
