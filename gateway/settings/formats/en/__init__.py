"""The console's formats in English (`formats`)."""
