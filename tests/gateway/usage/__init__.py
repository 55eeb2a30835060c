"""The usage spool and writer (gateway/usage/)."""
