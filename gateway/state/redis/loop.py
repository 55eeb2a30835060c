"""The counter steps of gateway/state/counters.py, run from the event loop: a request's checks then need
no hand-off to a worker thread. Same scripts, same keys, same results.

Only when the chosen backend is Redis (`available()`, gateway/state/backend.py); the embedded
default keeps its counters in the Django cache, which only synchronous code may touch, so callers
use the synchronous step then.

The client is our own, not redis.asyncio: one connection per event loop, commands written as they
come and their replies read in order (Redis answers a connection's commands in order), the
commands of one loop turn sent in one write, replies parsed by hiredis. redis.asyncio spent about
a fifth of a proxied call's CPU on its two counter steps (a pool checkout, a retry wrapper, a
timeout task and a Python parser per command: bench/README.md). Its failures are redis-py's
exceptions, so an outage is answered as before (gateway/web/errors.py): ConnectionError when Redis
cannot be reached or the connection drops (tried again twice on a new connection first, as the
redis-py client was configured), TimeoutError after `TIMEOUT_SECONDS` without an answer, and the
error replies redis-py would raise (BusyLoadingError while Redis loads its data, ...).

With Sentinel (REDIS_SENTINELS, gateway/state/redis/sentinel.py), each new connection asks the Sentinels in turn for
the primary (`SENTINEL get-master-addr-by-name`); a `READONLY` reply (the server was demoted: a failover happened)
closes the connection and fails as a lost connection, so the command is tried again on the new primary. Nothing of
this runs on a connection that works: a call costs what it cost without Sentinel.

An asyncio connection belongs to the loop that opened it: each loop gets a client of its own
(one loop per web process; tests may run several, one after the other).
"""

from __future__ import annotations

import asyncio
import ssl
import weakref
from collections import deque

import hiredis
from redis._parsers.base import BaseParser
from redis.connection import parse_url
from redis.exceptions import ConnectionError, NoScriptError, ReadOnlyError, ResponseError, TimeoutError

from gateway.state.redis.client import (
    ADD_SCRIPT,
    HIT_SCRIPT,
    KEY_PREFIX,
    add_script_call,
    hit_script_call,
    hit_script_result,
    primary_seen,
    script_sha,
)
from gateway.state.windows import HitResult

TIMEOUT_SECONDS = 2.0
RETRY_DELAYS = (0.01, 0.05)  # before the second and the third try of a command whose connection failed

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_chosen = None  # the backend gateway/state/backend.py chose (it says so: `follow`)


def follow(chosen) -> None:
    """The shared state is now `chosen` (a backend with `on_loop`, `url` and `sentinels`)."""
    global _chosen
    _chosen = chosen


def available() -> bool:
    """Whether the counters may be stepped from the loop: the chosen backend is Redis."""
    return _chosen is not None and _chosen.on_loop


def _pack(args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode("utf-8")
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class _Connection(asyncio.Protocol):
    """One connection: a reply answers the oldest command still waiting."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.waiting: deque[asyncio.Future] = deque()
        self.outgoing: list[bytes] = []
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            if not self.waiting:  # a reply to nothing: the connection cannot be trusted
                self.close()
                return
            answer = self.waiting.popleft()
            if answer.done():  # timed out: the connection is being closed
                continue
            if isinstance(reply, hiredis.ReplyError):
                error = BaseParser.parse_error(str(reply))
                if isinstance(error, ReadOnlyError):  # a demoted primary: the next try goes to the new one
                    error = ConnectionError(f"Redis is now a replica: {reply}")
                    self.close()
                answer.set_exception(error)
            else:
                answer.set_result(reply)

    def connection_lost(self, exc) -> None:
        self.closed = True
        while self.waiting:
            answer = self.waiting.popleft()
            if not answer.done():
                answer.set_exception(ConnectionError("Connection to Redis lost."))

    def send(self, args) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        answer = loop.create_future()
        if self.closed:
            answer.set_exception(ConnectionError("Connection to Redis lost."))
            return answer
        self.waiting.append(answer)
        if not self.outgoing:
            loop.call_soon(self._flush)
        self.outgoing.append(_pack(args))
        return answer

    def _flush(self) -> None:
        data, self.outgoing = b"".join(self.outgoing), []
        if not self.closed:
            self.transport.write(data)

    def close(self) -> None:
        """No more commands on this connection; those waiting fail when it is gone (connection_lost)."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()


class LoopRedis:
    """A Redis client for one event loop (see the module's docstring)."""

    def __init__(self, url: str, sentinels=None) -> None:
        self.url = url
        self.sentinels = sentinels  # gateway/state/redis/sentinel.py's `Sentinels`, or None: the server at `url`
        self.options = parse_url(url)
        self.connection: _Connection | None = None
        self.connecting = asyncio.Lock()

    async def command(self, *args):
        """The reply to one command; tried again on a new connection when its connection failed."""
        return (await self.commands(args))[0]

    async def commands(self, *commands) -> list:
        """The replies to several commands written at once (one round trip), in order; tried again on a
        new connection as `command` is. An error reply raises once the replies before it are in."""
        for delay in (*RETRY_DELAYS, None):
            try:
                connection = await self._connected()
                answers = [connection.send(args) for args in commands]
                try:
                    return [await self._answer(connection, answer) for answer in answers]
                except BaseException:
                    for answer in answers:  # those not awaited: their outcome is not reported as lost
                        answer.add_done_callback(_outcome_read)
                    raise
            except ConnectionError:
                if delay is None:
                    raise
                await asyncio.sleep(delay)

    async def script(self, source: str, keys: list, args: list, *also):
        """EVALSHA, or EVAL once when Redis does not have the script (it restarted). With `also`
        (commands such as `("MGET", key, ...)`), they go in the same write: the replies are then the
        script's followed by theirs."""
        try:
            replies = await self.commands(("EVALSHA", script_sha(source), len(keys), *keys, *args), *also)
        except NoScriptError:
            replies = await self.commands(("EVAL", source, len(keys), *keys, *args), *also)
        return replies if also else replies[0]

    async def _answer(self, connection: _Connection, answer: asyncio.Future):
        timer = asyncio.get_running_loop().call_later(TIMEOUT_SECONDS, self._time_out, connection, answer)
        try:
            return await answer
        finally:
            timer.cancel()

    @staticmethod
    def _time_out(connection: _Connection, answer: asyncio.Future) -> None:
        if not answer.done():  # the replies that follow would answer the wrong commands: a new connection
            answer.set_exception(TimeoutError(f"Redis did not answer within {TIMEOUT_SECONDS} s."))
            connection.close()

    async def _connected(self) -> _Connection:
        """The open connection, or a new one (the steps waiting meanwhile share it)."""
        if self.connection is None or self.connection.closed:
            async with self.connecting:
                if self.connection is None or self.connection.closed:
                    self.connection = await self._connect()
        return self.connection

    async def _connect(self) -> _Connection:
        loop, options = asyncio.get_running_loop(), self.options
        try:
            if self.sentinels is not None:
                host, port = await self._primary()
                opening = loop.create_connection(_Connection, host, port)
            elif "path" in options:
                opening = loop.create_unix_connection(_Connection, options["path"])
            else:
                tls = ssl.create_default_context() if self.url.startswith("rediss://") else None
                opening = loop.create_connection(_Connection, options.get("host", "localhost"),
                                                 options.get("port", 6379), ssl=tls)
            _, connection = await asyncio.wait_for(opening, TIMEOUT_SECONDS)
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionError(f"Cannot connect to Redis: {exc}") from None
        setup = []
        if options.get("password"):
            setup.append(("AUTH", options["username"], options["password"]) if options.get("username")
                         else ("AUTH", options["password"]))
        if options.get("db"):
            setup.append(("SELECT", options["db"]))
        try:
            for args in setup:
                await self._answer(connection, connection.send(args))
        except BaseException:
            connection.close()
            raise
        return connection

    async def _primary(self) -> tuple[str, int]:
        """The primary's address, from the first Sentinel that names one (ConnectionError when none does)."""
        loop, problems = asyncio.get_running_loop(), []
        for host, port in self.sentinels.addresses:
            try:
                _, asking = await asyncio.wait_for(loop.create_connection(_Connection, host, port), TIMEOUT_SECONDS)
            except (OSError, asyncio.TimeoutError) as exc:
                problems.append(f"{host}:{port}: {exc or type(exc).__name__}")
                continue
            try:
                if self.sentinels.password:
                    await self._answer(asking, asking.send(("AUTH", self.sentinels.password)))
                reply = await self._answer(asking, asking.send(("SENTINEL", "get-master-addr-by-name",
                                                                self.sentinels.service)))
            except (ConnectionError, TimeoutError, ResponseError) as exc:
                problems.append(f"{host}:{port}: {exc}")
                continue
            finally:
                asking.close()
            if reply:
                address = reply[0].decode(), int(reply[1])
                primary_seen(address, self.url, self.sentinels)
                return address
            problems.append(f"{host}:{port}: no primary for {self.sentinels.service!r}")
        raise ConnectionError(f"No Sentinel names a primary: {'; '.join(problems)}")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def _outcome_read(answer: asyncio.Future) -> None:
    if not answer.cancelled():
        answer.exception()


def _client() -> LoopRedis:
    """The running loop's client of the chosen Redis (a new one when the choice moved to another)."""
    return loop_client(_clients)


def loop_client(clients: weakref.WeakKeyDictionary) -> LoopRedis:
    """The running loop's client in `clients` (one per event loop) of the chosen Redis: a new one
    when there is none yet or the choice moved to another Redis. The counters keep one such set,
    the response cache another (gateway/cache/store.py), so neither waits behind the other's replies."""
    loop = asyncio.get_running_loop()
    client = clients.get(loop)
    url = _chosen.url
    if client is None or client.url != url:
        if client is not None:
            client.close()
        client = clients[loop] = LoopRedis(url, _chosen.sentinels)
    return client


async def window_hit(counters: list[tuple[str, int]], window: int, *, guards=(), reads=(), beside=()) -> HitResult:
    """`gateway.state.counters.window_hit` in one round trip from the loop."""
    guards, reads = list(guards), list(reads)
    keys, args = hit_script_call(counters, window, guards, reads)
    if not beside:
        return hit_script_result(await _client().script(HIT_SCRIPT, keys, args), counters, len(guards))
    raw, values = await _client().script(HIT_SCRIPT, keys, args, ("MGET", *(KEY_PREFIX + key for key in beside)))
    return hit_script_result(raw, counters, len(guards), values)


async def amounts_add(additions: list[tuple[str, int]], *, pending=None, record: str = "") -> None:
    """`gateway.state.counters.amounts_add` from the loop."""
    if additions := [(key, amount) for key, amount in additions if amount > 0]:
        await _client().script(ADD_SCRIPT, *add_script_call(additions, pending if record else None, record))
