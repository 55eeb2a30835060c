"""The Celery app. Periodic tasks are declared here, in one place."""

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

app = Celery("gateway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

app.conf.beat_schedule = {
    "purge-expired-sessions": {"task": "accounts.tasks.purge_expired_sessions", "schedule": crontab(minute=17)},
}
