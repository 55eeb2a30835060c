"""The operator console for the native surface: profiles, collections, conversations, MCP servers."""

from django.contrib import admin  # noqa: F401  (each part registers its own ModelAdmin below)
