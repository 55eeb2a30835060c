"""The operator console for routines: routines, runs with their deliveries, the inbox."""

from django.contrib import admin  # noqa: F401  (each part registers its own ModelAdmin below)
