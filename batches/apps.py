from django.apps import AppConfig


class BatchesConfig(AppConfig):
    name = "batches"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Bulk work"  # the console's section: its batches (not "Batches › Batches")

    def ready(self) -> None:
        # The batch queue's tasks, registered in every process, so that the web finds them by name.
        from batches import tasks  # noqa: F401
