"""The wire formats' translations (gateway/formats/)."""
