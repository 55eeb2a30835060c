# Aliases: a public model name over a weighted list of deployments, with a balancing
# policy, an optional affinity and fallbacks of its own. Written beside 0009_usage_record_cached
# (the response cache, written at the same time); the merge that joins them is added with both.

import django.db.models.deletion
import gateway.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('gateway', '0008_server_field_translation'),
    ]

    operations = [
        migrations.CreateModel(
            name='Alias',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="The model name clients send (not server/model: that names a server's model).", max_length=200, unique=True, validators=[gateway.models.validate_alias_name])),
                ('policy', models.CharField(choices=[('weighted', 'Weighted: at random, by weight'), ('least-busy', 'Least busy: fewest calls in flight for its weight'), ('latency', 'Latency: the lowest moving time to first byte')], default='weighted', max_length=16)),
                ('affinity', models.CharField(choices=[('none', 'None'), ('session', 'Session: one X-Session-Id header or native conversation stays on one deployment'), ('user', 'User: one `user` field stays on one deployment (else the session)')], default='none', help_text='Calls of one session or user go to the same deployment while it is healthy, so its prefix cache is reused.', max_length=16)),
                ('enabled', models.BooleanField(default=True, help_text='A disabled alias is as if it did not exist.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'verbose_name_plural': 'aliases',
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='AliasFallback',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveSmallIntegerField(default=0)),
                ('alias', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='fallback_links', to='gateway.alias')),
                ('fallback', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='gateway.model')),
            ],
            options={
                'ordering': ['position', 'id'],
                'constraints': [models.UniqueConstraint(fields=('alias', 'fallback'), name='alias_fallback_once')],
            },
        ),
        migrations.AddField(
            model_name='alias',
            name='fallbacks',
            field=models.ManyToManyField(blank=True, related_name='+', through='gateway.AliasFallback', through_fields=('alias', 'fallback'), to='gateway.model'),
        ),
        migrations.CreateModel(
            name='AliasDeployment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('weight', models.PositiveIntegerField(default=1, help_text='Its share of the calls; 0 = only when the others fail.')),
                ('alias', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deployments', to='gateway.alias')),
                ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='alias_deployments', to='gateway.model')),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('alias', 'model'), name='alias_deployment_once')],
            },
        ),
    ]
