"""Which deployment of a pool answers a call, and which are tried after it
(docs/decisions/0110-pools-and-aliases.md).

A pool is an alias, or a bare name several enabled servers hold (gateway/registry/snapshot.py
`Pool`). `order` puts its deployments in the order a call tries them: the pick first, then the
others in the policy's order, so a failure before the first byte moves to the pool's next
deployment before any fallback (gateway/registry/routing.py builds the chain around it).

- A deployment whose server cools down (gateway/registry/cooldown.py) goes last, and one that failed
  its last call in this process lately (gateway/registry/server_health.py `failing`) just before:
  every policy skips them while another deployment is healthy. A cooldown that ended is healthy
  again, so the pick itself sends the probe that brings it back.
- A deployment of weight 0 is a standby: after the healthy ones, before the failing ones.
- `weighted`: at random, by weight (each healthy deployment's chance is its share of the weights).
- `least-busy`: the fewest calls in flight for its weight, across every process (gateway/state/loads.py);
  ties at random by weight.
- `latency`: the lowest moving time to first byte. The deployments within LATENCY_TOLERANCE (or
  LATENCY_SLACK_SECONDS) of the fastest share the calls by weight, so the fastest is not flooded on
  a difference of noise; one not tried for LATENCY_PROBE_SECONDS (or never measured) gets the next
  call, so a deployment that was slow can show it is fast again.
- Affinity: with a key (the session, or the `user` field), the healthy deployments come in the
  order the key prefers them (rendezvous hashing by weight: no state): the first is the key's home
  while it is healthy, so a server's prefix cache is reused; when it goes down the key moves to its
  next one, and back when it returns. The policy orders the calls that have no key.

All of it is arithmetic on this process's copies: no I/O on the call's way.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.registry import cooldown, server_health
from gateway.registry.cooldown import Verdict
from gateway.registry.snapshot import Deployment, Pool, Target
from gateway.state import loads

WEIGHTED, LEAST_BUSY, LATENCY = "weighted", "least-busy", "latency"  # gateway.models.Alias.Policy
NO_AFFINITY, SESSION, USER = "none", "session", "user"  # gateway.models.Alias.Affinity
LATENCY_TOLERANCE = 0.2  # within 20 % of the fastest...
LATENCY_SLACK_SECONDS = 0.010  # ...or 10 ms: on a fast network the difference is noise
LATENCY_PROBE_SECONDS = 30.0


@dataclass(frozen=True)
class Affinity:
    """What ties a call to others of its kind: its session (an `X-Session-Id` header, or a native
    conversation) and its `user` field. A pool's affinity says which it follows."""

    session: str | None = None
    user: str | None = None

    def key_for(self, mode: str) -> str | None:
        if mode == SESSION:
            return self.session
        if mode == USER:
            return self.user or self.session
        return None


NO_KEYS = Affinity()


def order(pool: Pool, deployments: Sequence[Deployment], affinity: Affinity = NO_KEYS) -> list[Target]:
    """`deployments` (the pool's, those the caller may use) in the order a call tries them."""
    if len(deployments) == 1:
        return [deployments[0].target]
    healthy, standby, failing, cooling = [], [], [], []
    for deployment in deployments:
        server = deployment.target.server
        if cooldown.verdict(server) is Verdict.SKIP:
            cooling.append(deployment)
        elif server_health.failing(server.id):
            failing.append(deployment)
        elif deployment.weight > 0:
            healthy.append(deployment)
        else:
            standby.append(deployment)
    loads.watch(tuple(d.target.id for d in deployments))
    key = affinity.key_for(pool.affinity)
    healthy = affine(key, healthy) if key else POLICIES.get(pool.policy, weighted)(healthy)
    return [d.target for d in (*healthy, *standby, *failing, *cooling)]


def weighted(deployments: list[Deployment]) -> list[Deployment]:
    """A random order by weight: each deployment comes first with its share of the weights, and so on
    for the rest (Efraimidis and Spirakis: sorted by u^(1/weight), u uniform in (0, 1))."""
    if len(deployments) < 2:
        return deployments
    return sorted(deployments, key=_draw, reverse=True)


def _draw(deployment: Deployment) -> float:
    return random.random() ** (1.0 / deployment.weight)


def least_busy(deployments: list[Deployment]) -> list[Deployment]:
    """The fewest calls in flight for its weight first; ties in a random order by weight."""
    if len(deployments) < 2:
        return deployments
    return sorted(deployments, key=lambda d: (loads.in_flight(d.target.id) / d.weight, -_draw(d)))


def fastest(deployments: list[Deployment]) -> list[Deployment]:
    """The `latency` policy: a probe first when one is due, then those near the fastest (by weight),
    then the slower ones, then those still unmeasured."""
    if len(deployments) < 2:
        return deployments
    now = time.time()
    measured, due, waiting = [], [], []
    for deployment in deployments:
        seconds = loads.latency(deployment.target.id)
        idle = now - loads.last_tried(deployment.target.id) > LATENCY_PROBE_SECONDS
        if idle:
            due.append(deployment)
        elif seconds is None:
            waiting.append(deployment)  # its first call is out (or failed): not again at once
        else:
            measured.append((seconds, deployment))
    probe = []
    if due:
        chosen = min(due, key=lambda d: loads.last_tried(d.target.id))
        loads.tried_now(chosen.target.id)
        probe = [chosen]
        measured += [(math.inf, d) for d in due if d is not chosen]
    measured.sort(key=lambda pair: pair[0])
    if not measured:
        return [*probe, *weighted(waiting)]
    best = measured[0][0]
    limit = max(best * (1 + LATENCY_TOLERANCE), best + LATENCY_SLACK_SECONDS)
    near = [d for seconds, d in measured if seconds <= limit]
    slower = [d for seconds, d in measured if seconds > limit]
    return [*probe, *weighted(near), *slower, *weighted(waiting)]


POLICIES = {WEIGHTED: weighted, LEAST_BUSY: least_busy, LATENCY: fastest}


def affine(key: str, deployments: list[Deployment]) -> list[Deployment]:
    """`deployments` in the order `key` prefers them: weighted rendezvous hashing (by -weight / ln(u),
    u the key and the deployment's hash in (0, 1)). The first is the key's home; when it leaves, only
    its keys move (each to its own next one, which was already its fall-through), and they come back
    when it returns."""
    def score(deployment: Deployment) -> float:
        digest = hashlib.blake2b(f"{key}\x00{deployment.target.public_id}".encode(), digest_size=8).digest()
        u = (int.from_bytes(digest, "big") + 0.5) / 2.0 ** 64
        return -deployment.weight / math.log(u)

    return sorted(deployments, key=score, reverse=True)
