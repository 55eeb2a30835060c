"""The operator's configuration file (`manage.py applyconfig FILE`, docs/configuration.md): reading
and checking it (`checks`), the servers, models, default model and groups (`apply`), the aliases
(`aliases`), a group's guardrails (`guardrails`, also read by the admin's group page)."""

from gateway.registry.config_file.apply import Summary, apply_config, apply_config_file, read_config
from gateway.registry.config_file.checks import ConfigError

__all__ = ["ConfigError", "Summary", "apply_config", "apply_config_file", "read_config"]
