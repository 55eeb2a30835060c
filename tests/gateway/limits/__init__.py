"""Request ceilings and token quotas (gateway/limits/)."""
