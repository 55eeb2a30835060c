from celery import shared_task

from accounts.idempotency import idempotency_sweep
from accounts.sessions import sessions_purge_expired


@shared_task
def purge_expired_sessions() -> int:
    return sessions_purge_expired()


@shared_task
def sweep_idempotent_requests() -> int:
    return idempotency_sweep()
