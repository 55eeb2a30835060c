# The exact response cache: a group's replies kept this many seconds; 0 = off.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='accountgroup',
            name='response_cache_ttl',
            field=models.PositiveIntegerField(default=0, help_text="Seconds a whole, successful chat reply is kept and given again for the same request (the exact response cache, shared by the group's members); 0 = off."),
        ),
    ]
