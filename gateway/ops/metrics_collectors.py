"""What GET /metrics answers: the values every process wrote (prometheus_client's
MultiProcessCollector over settings.PROMETHEUS_MULTIPROC_DIR), and two readings taken at scrape
time, which no process counts as it goes:

- the task queue's length: the messages waiting in the Celery broker (Redis lists, or the
  filesystem transport's folder), per queue;
- the usage spool's backlog: the usage records waiting in this host's spool files for the
  database (gateway/usage/spool.py), and the age of the oldest one: a backlog that grows, or an oldest
  record that keeps ageing, is a database that does not take them (gateway/usage/writer.py).

A reading that fails (the broker is down) is left out of the answer, logged, and shown by
`gateway_scrape_reading_up{reading} 0`; the scrape itself still answers.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

logger = logging.getLogger(__name__)


class ScrapeTimeReadings:
    """The readings of one scrape, taken when it collects."""

    def collect(self):
        from gateway.usage.writer import usage_writer

        up = {}
        depths = queue_depths()
        up["queue_depth"] = depths is not None
        if depths is not None:
            family = GaugeMetricFamily("gateway_queue_depth", "Tasks waiting in the Celery broker, per queue (read "
                                       "at scrape time).", labels=["queue"])
            for queue, depth in sorted(depths.items()):
                family.add_metric([queue], depth)
            yield family
        try:
            backlog = usage_writer.spool().backlog()
        except Exception as exc:
            _failed("spool_backlog", exc)
            backlog = None
        up["spool_backlog"] = backlog is not None
        if backlog is not None:
            yield GaugeMetricFamily("gateway_usage_spool_backlog_records", "Usage records in this host's spool files, "
                                    "not yet known to be in the database (read at scrape time).",
                                    value=backlog.records)
            yield GaugeMetricFamily("gateway_usage_spool_files", "Spool files on this host (each process's own, and "
                                    "those of processes gone, waiting to be taken over).", value=backlog.files)
            age = max(time.time() - backlog.oldest, 0.0) if backlog.oldest is not None else 0.0
            yield GaugeMetricFamily("gateway_usage_spool_oldest_record_age_seconds", "Age of the oldest usage "
                                    "record waiting in the spool (0 when none waits).", value=age)
        family = GaugeMetricFamily("gateway_scrape_reading_up", "1 when this scrape could take the reading "
                                   "(queue_depth: the broker; spool_backlog: the spool folder), 0 when it failed.",
                                   labels=["reading"])
        for reading, ok in up.items():
            family.add_metric([reading], 1.0 if ok else 0.0)
        yield family


def queue_depths() -> dict[str, int] | None:
    """Each queue's length, or None when the broker cannot be read now (logged at WARNING)."""
    from gateway.celery import app

    timeout = settings.METRICS_BROKER_TIMEOUT_SECONDS
    options = {**(app.conf.broker_transport_options or {}), "socket_timeout": timeout,
               "socket_connect_timeout": timeout, "max_retries": 0}
    queues = {app.conf.task_default_queue, *app.amqp.queues}
    try:
        with app.connection_for_read(transport_options=options, connect_timeout=timeout) as connection:
            channel = connection.default_channel
            # kombu's virtual transports (Redis, filesystem) count a queue's messages with `_size`
            # (every priority list on Redis); a passive declare would refuse a queue that is empty
            return {queue: int(channel._size(queue)) for queue in sorted(queues)}
    except Exception as exc:
        _failed("queue_depth", exc)
        return None


def _failed(reading: str, exc: Exception) -> None:
    logger.warning("metrics: %s not read: %s: %s", reading, type(exc).__name__, exc)


def exposition() -> bytes:
    """The text format of every series: the files of all processes, then the scrape-time readings."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(settings.PROMETHEUS_MULTIPROC_DIR))
    registry.register(ScrapeTimeReadings())
    return generate_latest(registry)
