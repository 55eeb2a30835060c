from django.apps import AppConfig


class RoutinesConfig(AppConfig):
    name = "routines"
    default_auto_field = "django.db.models.BigAutoField"
    # the console's section: routines, their runs, events, inbox and channels (not "Routines › Routines")
    verbose_name = "Automation"

    def ready(self) -> None:
        # Registers the routines' Celery tasks in every process, the web's too, so the modules
        # that queue work find them by name (routines/queue.py) without importing tasks.py back.
        from routines import tasks  # noqa: F401
