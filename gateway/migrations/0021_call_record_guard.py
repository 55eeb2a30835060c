# The findings of a group's guardrails on its call's row of the calls log: which check, what it found,
# the action and where (input or output, which text, how far into it), never the text found. The column
# keeps a database default, so a calls writer of the release before (still running mid-deploy) inserts
# rows without it. No backfill: the calls recorded before were never checked.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0020_carried_betas_for_every_cloud'),
    ]

    operations = [
        migrations.AddField(
            model_name='callrecord',
            name='guard',
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
    ]
