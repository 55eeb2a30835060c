"""The model registry: routing, cooldown, discovery, the stamp, the configuration file (gateway/registry/)."""
