"""The Django shell and the processes around it: settings, Procfile, bin/serve, Celery, the docs' links."""
