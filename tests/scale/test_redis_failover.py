"""Redis primary failover through Sentinel across hosts: under chat calls through the
balancer, the Redis primary's host is lost (its redis-server and its Sentinel SIGKILLed); the two
other Sentinels promote the replica, and every gateway host follows it. During the switch calls get
503 with Retry-After at worst, never a 500 or a dropped connection; after it, every answered call
is metered once and the quota counters, rebuilt as after a restart, equal the records on every host."""

from __future__ import annotations

import time
from collections import Counter

from tests.faults import checks
from tests.faults.services import wait_for
from tests.scale import load
from tests.scale.cluster import Cluster
from tests.scale.report import figures
from tests.scale.test_across_hosts import MODEL, accounts, check_usage_on_every_host
from tests.scale.test_host_faults import QUOTA, REBUILT_SHORT, spread

BACK_WITHIN = 30.0



def test_redis_primary_host_lost_under_load(hosts: Cluster):
    *accs, prober = accounts(hosts, "failover", 13, daily_tokens=QUOTA)
    old = hosts.redis.primary_role()
    drive = load.Drive(hosts, spread(accs, "failover"), rate=30, concurrency=8, deadline=40).start()
    drive.wait_answered(60)
    hosts.redis.servers[old].kill()
    hosts.redis.sentinels[old].kill()
    lost_at = time.monotonic()
    try:
        wait_for(lambda: hosts.redis.primary_role() != old, BACK_WITHIN, "the Sentinels to promote the replica",
                 interval=0.2)
        switched = time.monotonic() - lost_at
        wait_for(lambda: load.run(hosts, [load.chat(prober["key"], MODEL, "failover-back")])[0].status == 200,
                 BACK_WITHIN, "a call answered 200 after the switch", interval=0.3)
        answers = drive.join()
    finally:
        hosts.redis.start()  # the old primary back, made a replica of the new one by the Sentinels
    statuses = Counter(a.status for a in answers)
    answered = [a for a in answers if a.status == 200]
    usage = hosts.pg.query("SELECT count(*) FROM gateway_usagerecord WHERE account_id = ANY(%s)",
                           ([a["account_id"] for a in accs],))[0][0]
    refused = [a.started + a.elapsed - lost_at for a in answers if a.status == 503]
    window = f"503s answered from {min(refused):.1f}s to {max(refused):.1f}s after the loss" if refused else "no 503"
    figures("the Redis primary's host lost (Sentinel failover)", [
        f"{len(answers)} calls made: {dict(statuses)}; the replica promoted {switched:.1f}s after the loss, "
        f"{window}",
        f"{len(answered)} answered, {usage} usage records (checked once the spools drained)"])
    checks.check_answers(answers, outage=True)
    assert statuses[None] == 0, f"{statuses[None]} calls got no HTTP answer"
    for n, acc in enumerate(accs):
        checks.check_chats(hosts, acc, [a for a in answers if a.ident.startswith(f"failover{n}-")])
    usage = hosts.pg.query("SELECT count(*) FROM gateway_usagerecord WHERE account_id = ANY(%s)",
                           ([a["account_id"] for a in accs],))[0][0]
    assert usage == len(answered)
    short = check_usage_on_every_host(hosts, accs[0], rebuilt_calls=REBUILT_SHORT)
    figures("quota counters rebuilt after the failover", [
        f"/api/v1/usage short of the records by {short} call(s) (the calls in other hosts' spools when the "
        f"counter was rebuilt; at most {REBUILT_SHORT} allowed)"])
