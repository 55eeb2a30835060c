"""The shared counters and their backends (gateway/state/)."""
