"""Date and time formats of the console (settings.FORMAT_MODULE_PATH), by language: `en`."""
