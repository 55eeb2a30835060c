# Batch prices: a model's batch discount (percent off a batch line's cost, 50 by default; a database default
# too, so that a process of the release before, still running mid-deploy, adds models), an alias
# deployment's own (empty: the model's), and on each usage record the batch of a batch line's call (empty:
# a live call; a database default for the usage writer of the release before). Two partial indexes over the
# batch records alone: by time (the usage console's batch figures and filter) and by batch. No backfill:
# every record written before is a live call's.
#
# SQLite remakes the records' table to add a NOT NULL column, and will not rename a table a trigger names:
# the roll-up's triggers (migration 0011's) are dropped first and made again after, as in migrations 0016
# and 0018.

import importlib

import django.core.validators
from django.conf import settings
from django.db import migrations, models

usage_record_tags = importlib.import_module("gateway.migrations.0016_usage_record_tags")


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0022_stored_files'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='aliasdeployment',
            name='batch_discount_percent',
            field=models.PositiveSmallIntegerField(blank=True, help_text="Percent off a batch line through this alias; empty = the model's own discount.", null=True, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(100)], verbose_name='batch discount (%)'),
        ),
        migrations.AddField(
            model_name='model',
            name='batch_discount_percent',
            field=models.PositiveSmallIntegerField(db_default=50, default=50, help_text='Percent off the cost of a batch line (the Batch APIs), rounded down to the smallest unit; 0 = the live price, 100 = free.', validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(100)], verbose_name='batch discount (%)'),
        ),
        migrations.RunPython(usage_record_tags.sqlite_no_triggers, usage_record_tags.sqlite_cost_triggers),
        migrations.AddField(
            model_name='usagerecord',
            name='batch_id',
            field=models.CharField(blank=True, db_default='', default='', max_length=40),
        ),
        migrations.RunPython(usage_record_tags.sqlite_cost_triggers, usage_record_tags.sqlite_no_triggers),
        migrations.AddIndex(
            model_name='usagerecord',
            index=models.Index(condition=models.Q(('batch_id', ''), _negated=True), fields=['created_at'], name='usage_batch_time'),
        ),
        migrations.AddIndex(
            model_name='usagerecord',
            index=models.Index(condition=models.Q(('batch_id', ''), _negated=True), fields=['batch_id'], name='usage_batch'),
        ),
    ]
