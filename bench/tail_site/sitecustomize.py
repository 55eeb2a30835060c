"""Loaded by the gateway process of `bench/tail_latency.py --gc-log` (on its PYTHONPATH only):
one line per cyclic garbage collection (start, seconds, generation, objects collected) and one per
usage-drainer cycle (start, CPU seconds of its thread, wall seconds), to lay beside the load's stalls."""

import gc
import os
import sys
import threading
import time

_PATH = os.environ.get("BENCH_TAIL_LOG")
if _PATH:
    _log = open(f"{_PATH}.{os.getpid()}", "w", buffering=1)  # noqa: SIM115 - for the process's life
    _started = [0.0]

    def _on_collection(phase, info):
        if phase == "start":
            _started[0] = time.perf_counter()
        else:
            _log.write(f"gc {_started[0]:.6f} {time.perf_counter() - _started[0]:.6f} {info['generation']} "
                       f"{info['collected']}\n")

    gc.callbacks.append(_on_collection)

    def _time_drainer_cycles():
        deadline = time.monotonic() + 120
        while "gateway.usage.writer" not in sys.modules and time.monotonic() < deadline:
            time.sleep(0.05)
        writer = sys.modules.get("gateway.usage.writer")
        if writer is None:
            return
        drainer = writer.usage_writer.drainer  # its write was bound when it was made: wrapped there
        cycle = drainer._write

        def timed(*args, **kwargs):
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return cycle(*args, **kwargs)
            finally:
                _log.write(f"drain {wall:.6f} {time.thread_time() - cpu:.6f} {time.perf_counter() - wall:.6f}\n")

        drainer._write = timed

    threading.Thread(target=_time_drainer_cycles, daemon=True).start()

    def _in_forked_child():
        """gunicorn's worker and its dirty worker (the host's drainer) are forks: a log and a watcher of their own."""
        global _log
        _log = open(f"{_PATH}.{os.getpid()}", "w", buffering=1)  # noqa: SIM115 - for the process's life
        threading.Thread(target=_time_drainer_cycles, daemon=True).start()

    os.register_at_fork(after_in_child=_in_forked_child)
