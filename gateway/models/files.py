"""Files an account uploads through `/v1/files`: the row says whose a file is and what it holds; its bytes are
in the files storage (settings.STORAGES["files"]: a folder under the var dir, or S3-compatible object storage)
under `storage_name`. gateway/files/store.py writes and removes the two together. A file may expire
(`expires_at`): from then on it is not found, and the hourly sweep removes it, bytes and row."""

from django.db import models
from django.utils import timezone


class StoredFile(models.Model):
    """One uploaded file, OpenAI's file object (`file-…`)."""

    id = models.CharField(primary_key=True, max_length=40, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="stored_files")
    filename = models.CharField(max_length=255)
    purpose = models.CharField(max_length=20)
    bytes = models.BigIntegerField()
    storage_name = models.CharField(max_length=300, help_text="Where the bytes are in the files storage.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When it goes (OpenAI's `expires_after`, or a batch's output file's "
                                                "FILES_OUTPUT_EXPIRE_SECONDS); none: kept until deleted.")

    class Meta:
        verbose_name = "file"  # the console's "Files", as the API names them
        indexes = [models.Index(fields=["account", "created_at", "id"], name="stored_file_account_time"),
                   models.Index(fields=["expires_at"], name="stored_file_expiry")]

    def __str__(self) -> str:
        return f"{self.id} ({self.filename})"
