"""The batch queue's metrics, beside the gateway's (gateway/telemetry/metrics.py; what a batch line costs is
counted there, with every call's spend): lines ended by outcome, whose rate is the queue's lines per second,
and the lines waiting, as the sweep last counted them. Written to the process's metrics files like every
metric, so /metrics shows them whichever process counted."""

from prometheus_client import Counter, Gauge

LINES = Counter("gateway_batch_lines", "Batch lines ended, by outcome (succeeded, errored), and tries sent back to "
                "wait (retried); its rate is the batch queue's lines per second.", ["outcome"], registry=None)
QUEUE_DEPTH = Gauge("gateway_batch_queue_depth", "Batch lines waiting to run, as the batch sweep last counted them.",
                    multiprocess_mode="mostrecent", registry=None)


def line_ended(outcome: str) -> None:
    LINES.labels(outcome).inc()


def queue_depth(lines: int) -> None:
    QUEUE_DEPTH.set(lines)
