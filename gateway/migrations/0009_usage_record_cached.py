# A usage record answered from the response cache (issue 24), and an index of those records alone
# for the usage console's cache hits. The column keeps a database default, so a usage writer of the
# release before (still running mid-deploy) inserts its records as not cached.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0008_server_field_translation'),
    ]

    operations = [
        migrations.AddField(
            model_name='usagerecord',
            name='cached',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddIndex(
            model_name='usagerecord',
            index=models.Index(condition=models.Q(('cached', True)), fields=['created_at'], name='usage_cached_time'),
        ),
    ]
