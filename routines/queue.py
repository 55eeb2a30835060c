"""The tasks of routines by their registered names, for the modules that enqueue them: a run
(routines/run_start.py) and a delivery (routines/deliveries/). routines/tasks.py declares the
tasks under these names and calls those modules; they find the tasks here, in the Celery app's
registry (routines/apps.py has loaded it in every process), and so never import
routines/tasks.py back.

A task found here is the very object routines/tasks.py declares, so `apply_async` behaves as
before: sent to the broker, or run inline when tasks are eager (CELERY_TASK_ALWAYS_EAGER)."""

from gateway.celery import app

EXECUTE_RUN = "routines.tasks.execute_routine_run"
ENQUEUE_RUNS = "routines.tasks.enqueue_routine_runs"
DELIVER = "routines.tasks.deliver_run_target"


def task(name: str):
    """The task registered under `name` (routines/apps.py loads routines/tasks.py at start-up)."""
    return app.tasks[name]
