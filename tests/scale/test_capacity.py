"""The capacity model (docs/scaling.md): what one proxied call and one webhook event cost
the shared services, measured on the stack's own Redis (`INFO commandstats` deltas) and PostgreSQL
(`pg_stat_database` xact_commit, `pg_stat_user_tables` n_tup_ins deltas) over a known number of
calls, the background (workers polling the broker, beat, drainers) measured alone first and taken
off. The figures are printed; the test holds them under bounds, so a change that adds a Redis round
trip or a database write to every call is seen here."""

from __future__ import annotations

import os
import time
from collections import Counter

from tests.faults import checks
from tests.faults.services import wait_for
from tests.scale import load
from tests.scale.cluster import Cluster
from tests.scale.report import figures
from tests.scale.test_across_hosts import MODEL, V1_CEILING, accounts

CALLS_ACCOUNTS = 10  # 200 calls: 20 (the /v1 ceiling) for each
EVENTS = 60


def redis_calls(cluster: Cluster) -> Counter:
    client = cluster.redis.client()
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return Counter({name.removeprefix("cmdstat_"): values["calls"] for name, values in stats.items()})


# PostgreSQL's statistics reach pg_stat_database up to 10 s after a backend goes idle
# (PGSTAT_IDLE_INTERVAL): the commits are counted only when a run is given that long
# (SCALE_STATS_SETTLE=11 bin/test tests/scale/test_capacity.py, as docs/scaling.md's figures were);
# the rows inserted are counted exactly, at once, with count(*).
STATS_SETTLE = float(os.environ.get("SCALE_STATS_SETTLE", "0"))


own_transactions = 0  # the test's own reads are transactions too: taken off the commits


def query(cluster: Cluster, sql: str, params=()) -> list[tuple]:
    global own_transactions
    own_transactions += 1
    return cluster.pg.query(sql, params)


def pg_counts(cluster: Cluster) -> Counter:
    global own_transactions
    out = Counter()
    with cluster.pg.connect() as conn, conn.transaction():  # one transaction
        if STATS_SETTLE:
            out["xact_commit"] = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                                              (cluster.pg.dbname,)).fetchone()[0] - own_transactions
        for (table,) in conn.execute("SELECT relname FROM pg_stat_user_tables").fetchall():
            out[f"rows {table}"] = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    own_transactions += 1
    return out


def measure(cluster: Cluster, action, settled, units: int) -> tuple[dict, dict, float]:
    """Redis commands and PostgreSQL writes per unit of `action`, less the background's share."""
    r0, p0, t0 = redis_calls(cluster), pg_counts(cluster), time.monotonic()
    action()
    wait_for(settled, 30, "the work's records written")
    if STATS_SETTLE:
        time.sleep(STATS_SETTLE)  # by hand only: the statistics' own delay, not a condition
    r1, p1, t1 = redis_calls(cluster), pg_counts(cluster), time.monotonic()
    return ({k: (r1[k] - r0[k]) / units for k in r1 if r1[k] != r0[k]},
            {k: (p1[k] - p0[k]) / units for k in p1 if p1[k] != p0[k]}, t1 - t0)


def per_unit(redis: dict, pg: dict, background_redis: dict, background_pg: dict, seconds: float,
             units: int) -> tuple[dict, dict]:
    """Take off what the background did in as many seconds."""
    r = {k: round(v - background_redis.get(k, 0) * seconds / units, 2) for k, v in redis.items()}
    p = {k: round(v - background_pg.get(k, 0) * seconds / units, 2) for k, v in pg.items()}
    return {k: v for k, v in r.items() if v >= 0.05}, {k: v for k, v in p.items() if v >= 0.05}


def test_capacity_per_call_and_per_event(hosts: Cluster):
    accs = accounts(hosts, "cap", CALLS_ACCOUNTS, daily_tokens=10**9)
    routines = accounts(hosts, "capev", 1, routines=3)[0]
    # the background alone: 3 s of an idle stack (a pace of measurement, not a wait for a condition)
    idle_redis, idle_pg, idle = measure(hosts, lambda: time.sleep(3), lambda: True, 1)
    background_redis = {k: v / idle for k, v in idle_redis.items()}
    background_pg = {k: v / idle for k, v in idle_pg.items()}

    calls = CALLS_ACCOUNTS * V1_CEILING
    tag = os.urandom(3).hex()
    requests = [load.chat(acc["key"], MODEL, f"cap{n}-{tag}-{i}") for i in range(V1_CEILING)
                for n, acc in enumerate(accs)]
    answers = []
    ids = [a["account_id"] for a in accs]
    redis, pg, took = measure(
        hosts, lambda: answers.extend(load.run(hosts, requests, concurrency=8, deadline=40)),
        lambda: query(hosts, "SELECT count(*) FROM gateway_usagerecord WHERE account_id = ANY(%s)",
                      (ids,))[0][0] == calls
        and query(hosts, "SELECT count(*) FROM gateway_callrecord WHERE account_id = ANY(%s)",
                  (ids,))[0][0] == calls, calls)
    assert Counter(a.status for a in answers) == {200: calls}
    call_redis, call_pg = per_unit(redis, pg, background_redis, background_pg, took, calls)

    events = [load.event(routines["routines"][i % 3], f"cap-{tag}-{i}") for i in range(EVENTS)]
    event_answers = []

    def runs_done() -> bool:
        return query(hosts, "SELECT count(*) FROM routines_run run JOIN routines_routine r ON r.id = run.routine_id "
                     "WHERE r.account_id = %s AND run.status = 'succeeded'", (routines["account_id"],))[0][0] == EVENTS

    redis_e, pg_e, took_e = measure(
        hosts, lambda: event_answers.extend(load.run(hosts, events, concurrency=6, deadline=40)),
        runs_done, EVENTS)
    checks.check_events(hosts, routines, event_answers)
    event_redis, event_pg = per_unit(redis_e, pg_e, background_redis, background_pg, took_e, EVENTS)

    def show(title: str, figures_of: dict) -> str:
        return f"{title}: " + ", ".join(f"{k} {v:g}" for k, v in sorted(figures_of.items(), key=lambda kv: -kv[1]))

    figures("capacity: per proxied call and per webhook event (background taken off)", [
        f"{calls} calls, {EVENTS} events; background {sum(background_redis.values()):.0f} Redis commands/s, "
        f"{background_pg.get('xact_commit', 0):.1f} commits/s",
        show("Redis per call", call_redis), show("PostgreSQL per call", call_pg),
        show("Redis per event", event_redis), show("PostgreSQL per event", event_pg)])
    assert call_pg.get("rows gateway_usagerecord") == 1, call_pg
    assert sum(call_redis.values()) < 40, call_redis
