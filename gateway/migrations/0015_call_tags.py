# The tags of a call on its row of the calls log (OpenAI's `metadata` on /v1/chat/completions and
# /v1/responses, checked; on /v1/messages Anthropic's `metadata.user_id` as {"user_id": ...}). The column
# keeps a database default, so a calls writer of the release before (still running mid-deploy) inserts
# rows without tags. No backfill: the calls recorded before have none.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0014_calls_log'),
    ]

    operations = [
        migrations.AddField(
            model_name='callrecord',
            name='tags',
            field=models.JSONField(blank=True, db_default={}, default=dict),
        ),
    ]
