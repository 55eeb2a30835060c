"""Enqueueing from a new thread does not build Celery's result backend again
(it was a quarter of the webhook ingest's CPU)."""

import threading

from gateway.celery import app


def test_every_thread_shares_one_result_backend():
    backend = app.backend
    seen = []
    thread = threading.Thread(target=lambda: seen.append(app.backend))
    thread.start()
    thread.join()
    assert seen == [backend]
    assert backend.as_uri() == "disabled://"  # results are ignored: nothing is stored
