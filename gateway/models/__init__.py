"""The gateway's tables: the model registry (`registry`), what its calls leave behind (`records`) and the files
accounts upload (`files`).

The gateway's tables point at the accounts app's; its code reads those through its own models' relations
(`account_model`, `account_group_model`), without importing the app above it.
"""

from django.db import models

from gateway.models.files import StoredFile
from gateway.models.records import (
    CallCapture,
    CallFailureDaily,
    CallRecord,
    IdempotentRequest,
    UsageDaily,
    UsageRecord,
)
from gateway.models.registry import (
    BATCH_API_KINDS,
    CLOUD_KINDS,
    DEPLOYMENT_PRICE_HELP,
    GEMINI_ENDPOINT,
    PRICE_HELP,
    Alias,
    AliasDeployment,
    AliasFallback,
    Model,
    ModelFallback,
    ModelServer,
    bedrock_endpoint,
    validate_alias_name,
    validate_region,
    validate_server_url,
    vertex_endpoint,
)

__all__ = ["BATCH_API_KINDS", "CLOUD_KINDS", "DEPLOYMENT_PRICE_HELP", "GEMINI_ENDPOINT", "PRICE_HELP", "Alias",
           "AliasDeployment", "AliasFallback", "CallCapture",
           "CallFailureDaily", "CallRecord", "IdempotentRequest", "Model", "ModelFallback", "ModelServer",
           "StoredFile", "UsageDaily", "UsageRecord", "account_group_model", "account_model", "bedrock_endpoint",
           "validate_alias_name", "validate_region", "validate_server_url", "vertex_endpoint"]


def account_model() -> type[models.Model]:
    """The accounts app's Account, found through the usage record's relation: the gateway's tables
    point at the accounts', and its code reads them without importing the app above it."""
    return UsageRecord._meta.get_field("account").related_model


def account_group_model() -> type[models.Model]:
    """The accounts app's AccountGroup, found the same way (an account's `group`)."""
    return account_model()._meta.get_field("group").related_model
