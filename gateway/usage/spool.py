"""An append-only local spool: records kept on disk until the database has them.

Each process appends to files of its own in one directory, one JSON line per record in ONE
`write()` (O_APPEND), and holds an exclusive `flock` on each of its files for as long as it lives.
The kernel drops those locks when the process dies, however it dies (SIGKILL included), so a file
whose lock can be taken belongs to a dead process: any other process takes it over, replays it
and removes it (`take_over`). A process replays its own files with `replay`: the current file is
sealed (later records go to a new file) and each sealed file is handed to `write` in batches, then
removed. `write` must be idempotent (a file replayed twice, after a crash between the database's
commit and the unlink, writes nothing twice); when it raises, the file stays and is replayed later.
A process may also let its files go without writing them (`release`: sealed, renamed RELEASED and
closed), for another process of the host to take over: the host's drainer (gateway/usage/host_drain.py).

A line that does not parse is skipped: the last line of a process killed in the middle of its
`write()`, or what is left of a write the disk cut short. What the spool does not survive is the
loss of the disk it is on.

    spool = Spool(directory)
    spool.append({"k": "...", ...})          # in the caller's thread: one write(), no database
    spool.replay(write_batch, batch=500)     # in the drainer thread
    spool.take_over(write_batch, batch=500)  # the files of dead processes, and those let go
    spool.release()                          # this process's files, left to the host's drainer
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

logger = logging.getLogger(__name__)

SUFFIX = ".spool"
RELEASED = ".released" + SUFFIX  # the end of a file's name once its process let it go (`release`)
NEW_SUFFIX = ".new"  # a file being created: not yet locked, so not yet looked at by `take_over`
STALE_NEW_SECONDS = 60.0
READ_CHUNK = 1 << 20

Write = Callable[[list[dict]], object]


@dataclass(frozen=True)
class Backlog:
    records: int  # lines in the files: each a record (a last line cut short by a kill counts too)
    files: int
    oldest: float | None  # Unix time of the oldest record (its `t`), None when none has one


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()  # orders appends and the switch to a new file
        self._replay_lock = threading.Lock()  # one replay or take-over at a time
        self._fd: int | None = None  # the file appended to
        self._path: Path | None = None
        self._sealed: list[tuple[Path, int]] = []  # no longer appended to, still locked, to replay
        self._released: list[Path] = []  # let go by this process, until another takes them over
        self._torn = False  # the last write was cut short: the next one starts on a new line
        weak = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (s := weak()) is not None and s._after_fork())

    # --- the writing side (any thread) ----------------------------------------------------------

    def append(self, record: dict) -> None:
        """One record, as one JSON line in one `write()`. Raises OSError when the disk refuses it
        (whatever part of it reached the file is skipped on replay)."""
        line = json.dumps(record, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            if self._fd is None:
                self._fd, self._path = self._open_new()
            data = b"\n" + line if self._torn else line
            written = os.write(self._fd, data)
            if written != len(data):
                self._torn = True
                raise OSError(errno.ENOSPC, f"short write to {self._path} ({written} of {len(data)} bytes)")
            self._torn = False

    def _open_new(self) -> tuple[int, Path]:
        """A new file of this process, locked before it gets the name other processes look for."""
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}{SUFFIX}"
        new = self.directory / f".{name}{NEW_SUFFIX}"
        fd = os.open(new, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = self.directory / name
            os.rename(new, path)
        except BaseException:
            os.close(fd)
            new.unlink(missing_ok=True)
            raise
        return fd, path

    def seal(self) -> None:
        """Later records go to a new file; the current one (when it has any) waits for `replay`."""
        with self._lock:
            if self._fd is None or os.fstat(self._fd).st_size == 0:
                return
            self._sealed.append((self._path, self._fd))
            self._fd = self._path = None

    def release(self) -> int:
        """Let go of this process's files that hold records (the current one sealed first), unwritten,
        for another process of the host to take over (`take_over`); later records go to a new file.
        Each is renamed to end in RELEASED while still locked (its taker logs it as a hand-over, not as
        a dead process's), then closed, which drops the lock. Returns the files let go."""
        with self._replay_lock:
            self.seal()
            with self._lock:
                files, self._sealed = self._sealed, []
                self._released = [path for path in self._released if path.exists()]  # those not yet taken over
            let_go = []
            for path, fd in files:
                released = path.with_name(path.name[:-len(SUFFIX)] + RELEASED)
                try:
                    os.rename(path, released)
                except OSError:  # taken over under its own name, as a dead process's
                    released = path
                os.close(fd)
                let_go.append(released)
            with self._lock:
                self._released.extend(let_go)
            if files:
                self._open_ahead()
            return len(files)

    def _open_ahead(self) -> None:
        """The next file, made now (in the drainer's thread) rather than by the next append, on a call's
        way: about 0.2 ms of system calls. When it cannot be made, the next append tries again."""
        with self._lock:
            if self._fd is None:
                try:
                    self._fd, self._path = self._open_new()
                except OSError:
                    pass

    # --- the draining side ----------------------------------------------------------------------

    def replay(self, write: Write, *, batch: int = 500) -> int:
        """Seal the current file and hand every sealed file of this process to `write`, then remove
        it. Returns the records handed over; raises what `write` raises (the files stay)."""
        with self._replay_lock:
            self.seal()
            count = 0
            while self._sealed:
                path, fd = self._sealed[0]
                count += _replay_file(fd, path, write, batch)
                path.unlink(missing_ok=True)
                os.close(fd)  # the lock goes with it, once the file is gone
                self._sealed.pop(0)
            return count

    def take_over(self, write: Write, *, batch: int = 500) -> int:
        """Replay and remove the files of processes that are gone (those whose lock can be taken).
        Returns the records handed over; raises what `write` raises (the file stays)."""
        with self._replay_lock:
            count = 0
            for path in self._other_files():
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:  # replayed and removed meanwhile
                    continue
                try:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:  # its process is alive
                        continue
                    if os.fstat(fd).st_nlink == 0:  # replayed and removed by another process
                        continue
                    taken = _replay_file(fd, path, write, batch)
                    path.unlink(missing_ok=True)
                    count += taken
                    if not path.name.endswith(RELEASED):
                        logger.info("usage spool of a process that is gone written: %s (%d records)", path.name, taken)
                finally:
                    os.close(fd)
            self._remove_stale_new_files()
            return count

    def _remove_stale_new_files(self) -> None:
        """A file left half-made by a process killed while it created it (no record in it yet)."""
        try:
            paths = list(self.directory.glob("*" + NEW_SUFFIX))
        except OSError:
            return
        for path in paths:
            try:
                if time.time() - path.stat().st_mtime < STALE_NEW_SECONDS:
                    continue
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                path.unlink(missing_ok=True)
            except OSError:
                pass
            finally:
                os.close(fd)

    def records(self) -> Iterator[dict]:
        """Every record in the directory's files, this process's and the others' (read as they
        are: records being written to the database at the same moment are in it too)."""
        for path, fd in self._each_file():
            yield from _file_records(fd, path, quiet=True)

    def _each_file(self) -> Iterator[tuple[Path, int]]:
        """Each spool file of the directory, in name order, open for reading while the caller has it."""
        try:
            paths = sorted(self.directory.glob("*" + SUFFIX))
        except OSError:
            return
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:  # written and removed meanwhile
                continue
            try:
                yield path, fd
            finally:
                os.close(fd)

    def backlog(self) -> Backlog:
        """How much waits in the directory's files (every process's): records counted as lines,
        without parsing them (a scrape of a large backlog stays cheap), and the time of the
        oldest, from the first line of each file."""
        records = files = 0
        oldest = None
        for path, fd in self._each_file():
            offset, first = 0, b""
            while chunk := os.pread(fd, READ_CHUNK, offset):
                if offset == 0:
                    first = chunk.split(b"\n", 1)[0]
                records += chunk.count(b"\n")
                offset += len(chunk)
            files += offset > 0  # a file made ahead (`release`) holds nothing yet
            record = _parse(first, path, quiet=True) if first.endswith(b"}") else None
            if record is not None and isinstance(record.get("t"), str):
                try:
                    at = datetime.fromisoformat(record["t"]).timestamp()
                except ValueError:
                    continue
                oldest = at if oldest is None else min(oldest, at)
        return Backlog(records=records, files=files, oldest=oldest)

    def owns(self, path: Path) -> bool:
        return path == self._path or any(path == sealed for sealed, _ in self._sealed)

    def pending(self) -> int:
        """Files of this process not yet replayed (the current one included when it has records), and
        those it let go that no process has taken over yet."""
        with self._lock:
            current = self._fd is not None and os.fstat(self._fd).st_size > 0
            self._released = [path for path in self._released if path.exists()]
            return len(self._sealed) + int(current) + len(self._released)

    def close(self) -> None:
        """Let go of this process's files (they stay on disk, to be taken over)."""
        with self._lock:
            for fd in [self._fd, *(fd for _, fd in self._sealed)]:
                if fd is not None:
                    os.close(fd)
            self._fd = self._path = None
            self._sealed = []

    def discard(self) -> None:
        """Remove this process's own files, records and all (tests: what a test spooled goes with its
        data). The files of other processes stay."""
        with self._replay_lock, self._lock:
            for path, fd in [(self._path, self._fd), *self._sealed]:
                if fd is not None:
                    path.unlink(missing_ok=True)
                    os.close(fd)
            self._fd = self._path = None
            self._sealed = []
            self._torn = False
            for path in self._released:
                path.unlink(missing_ok=True)
            self._released = []

    def _other_files(self) -> list[Path]:
        try:
            paths = sorted(self.directory.glob("*" + SUFFIX))
        except OSError:
            return []
        return [path for path in paths if not self.owns(path)]

    def _after_fork(self) -> None:
        """In a forked child: the parent's files stay the parent's. Closing the child's copies of
        their descriptors keeps the parent's locks (flock locks belong to the open file, which the
        parent still holds); the child opens files of its own when it appends."""
        self._lock = threading.Lock()
        self._replay_lock = threading.Lock()
        for fd in [self._fd, *(fd for _, fd in self._sealed)]:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fd = self._path = None
        self._sealed = []
        self._released = []
        self._torn = False


def _replay_file(fd: int, path: Path, write: Write, batch: int) -> int:
    count = 0
    chunk: list[dict] = []
    for record in _file_records(fd, path):
        chunk.append(record)
        if len(chunk) >= batch:
            write(chunk)
            count += len(chunk)
            chunk = []
    if chunk:
        write(chunk)
        count += len(chunk)
    return count


def _file_records(fd: int, path: Path, *, quiet: bool = False) -> Iterator[dict]:
    """The records of one open file, in order; lines that do not parse are skipped (a last line
    cut by a kill, what is left of a short write)."""
    offset = 0
    rest = b""
    while chunk := os.pread(fd, READ_CHUNK, offset):
        offset += len(chunk)
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            record = _parse(line, path, quiet=quiet)
            if record is not None:
                yield record
    if rest.strip():  # no newline after it: complete only if it parses
        record = _parse(rest, path, quiet=True)
        if record is not None:
            yield record
        elif not quiet:
            logger.info("usage spool %s: a last line cut short is skipped (%d bytes)", path.name, len(rest))


def _parse(line: bytes, path: Path, *, quiet: bool) -> dict | None:
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        if not quiet:
            logger.warning("usage spool %s: a line that is not a record is skipped (%d bytes)", path.name, len(line))
        return None
    return record
