# A cache-write price (per million input tokens a provider wrote to its prompt cache: Anthropic and
# Bedrock bill them above the input price) on models and alias deployments, and the count of those
# tokens on each usage record. The count keeps a database default, so a usage writer of the release
# before (still running mid-deploy) inserts records without it; the records written before have none.
#
# SQLite remakes the records' table to add a NOT NULL column, and will not rename a table a trigger
# names: the roll-up's triggers (migration 0011's) are dropped first and made again after, as in
# migration 0016.

import importlib

import django.core.validators
from django.db import migrations, models

usage_record_tags = importlib.import_module("gateway.migrations.0016_usage_record_tags")


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0017_cloud_servers'),
    ]

    operations = [
        migrations.AddField(
            model_name='aliasdeployment',
            name='cache_write_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million tokens through this alias; empty = the model's own price.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='model',
            name='cache_write_price',
            field=models.DecimalField(blank=True, decimal_places=4, help_text="Per million input tokens written to the provider's prompt cache (Anthropic, Bedrock); empty = the input price.", max_digits=12, null=True, validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.RunPython(usage_record_tags.sqlite_no_triggers, usage_record_tags.sqlite_cost_triggers),
        migrations.AddField(
            model_name='usagerecord',
            name='cache_write_input_tokens',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(usage_record_tags.sqlite_cost_triggers, usage_record_tags.sqlite_no_triggers),
    ]
