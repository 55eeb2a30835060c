"""The ASGI application of the Procfile's `web` (gunicorn with uvicorn workers, or uvicorn).

Django is set up first; then the hot routes' way in front of it (gateway/web/hotpath.py) and
the web process's start-up steps (gateway/ops/web_process.py), imported once Django is ready."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
# Collection search is one matrix-vector product per query: BLAS threads only contend with the
# other requests of the process (bench/README.md: 25 ms single-threaded against 34 ms at 100k chunks).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _application():
    django_application = get_asgi_application()
    from gateway.ops import web_process
    from gateway.web.hotpath import Application

    application = Application(django_application)
    web_process.start()
    return application


application = _application()
