# The aliases a group may use when "all models" is off. Written beside
# 0002_group_response_cache, at the same time; the merge that joins them is added with both.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('gateway', '0009_aliases'),
    ]

    operations = [
        migrations.AddField(
            model_name='accountgroup',
            name='allowed_aliases',
            field=models.ManyToManyField(blank=True, help_text="Used when 'all models' is off: these aliases, whatever their deployments' models.", related_name='groups', to='gateway.alias'),
        ),
    ]
