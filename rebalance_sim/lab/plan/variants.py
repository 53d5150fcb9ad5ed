"""Today's set-up and the alternatives a plan tries on it.

Each ``Variant`` is one change to the group (or none: ``today``), named in Kafka's words, with
the faults it is run under. The alternatives that apply depend on today's set-up:

- eager classic assignor (range, roundrobin, sticky) -> ``cooperative-sticky`` (KIP-429);
- classic protocol -> the consumer group protocol (KIP-848) with each server-side assignor,
  ``uniform`` and ``range``; already on it -> the other server-side assignor;
- dynamic members -> static membership (``group.instance.id``, KIP-345);
- a session timeout longer than the short one below -> that short one, under the crash (the
  coordinator notices a dead member only when its session expires; a deploy that stops members
  without ``close()`` is detected the same way, so the deploy too when it is not graceful);
- static members (today's or the alternative) whose restart outlasts the session timeout -> a
  session timeout that covers it, under the deploy.

The full alternatives (the first three kinds) run under every fault and are ranked; the
session-timeout ones only where the session timeout matters. Heartbeat intervals are not varied
(the ``protocols`` experiment measures the consumer protocol's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from .group import EAGER_ASSIGNORS, Group

FAULTS = ("deploy", "crash", "slow-member", "scale-out")
FAULT_TITLES = {
    "deploy": "deploy",
    "crash": "crash",
    "slow-member": "slow member",
    "scale-out": "scale-out",
}
TODAY = "today"
COOPERATIVE = "cooperative-sticky"
CONSUMER_UNIFORM = "consumer-uniform"
CONSUMER_RANGE = "consumer-range"
STATIC = "static"
SHORT_SESSION = "short-session"
STATIC_SESSION = "static-long-session"

# The short session timeouts tried under the crash: the classic client's default before KIP-735
# (Kafka 3.0) raised it to 45 s, and, under the consumer protocol, three of its default 5 s
# heartbeats (the broker's group.consumer.session.timeout.ms, whose default lower bound,
# group.consumer.min.session.timeout.ms, is 45 s and must come down with it).
SHORT_CLASSIC_SESSION_MS = 10_000
SHORT_CONSUMER_SESSION_MS = 15_000


@attrs.frozen
class Variant:
    """One set-up: ``key`` (the tables' ``variant`` column), ``label`` (for people), ``change``
    (what differs from today, as Kafka's settings), the consumer and broker fields it sets, and
    the faults it runs under; ``full``: run under every fault (ranked)."""

    key: str
    label: str
    change: str
    consumer: Mapping[str, Any] = attrs.field(factory=dict)
    broker: Mapping[str, Any] = attrs.field(factory=dict)
    faults: tuple[str, ...] = FAULTS
    full: bool = True


@attrs.frozen
class SetUp:
    """Today's set-up as the plan describes it."""

    protocol: str  # classic | consumer
    assignor: str  # the classic assignor the group uses, or the server-side one
    static: bool
    session_timeout_ms: float  # the one that fences a member under this protocol

    @property
    def eager(self) -> bool:
        return self.protocol == "classic" and self.assignor in EAGER_ASSIGNORS

    def describe(self) -> str:
        if self.protocol == "classic":
            kind = "eager" if self.eager else "cooperative"
            proto = f"classic protocol, {self.assignor} ({kind})"
        else:
            proto = f"consumer protocol (KIP-848), {self.assignor}"
        return f"{proto}, {'static' if self.static else 'dynamic'} members"


def set_up(group: Group) -> SetUp:
    """Today's protocol, assignor, membership and effective session timeout. Classic: the group
    uses the first assignor of partition.assignment.strategy (every member lists the same, and
    the coordinator picks the first all support: ConsumerCoordinator's protocol selection);
    consumer protocol: group.remote.assignor, else the broker's first group.consumer.assignors."""
    cfg = group.consumer_config()
    broker = group.broker_config()
    if cfg.group_protocol == "consumer":
        assignor = cfg.group_remote_assignor or broker.consumer_assignors[0]
        session = broker.consumer_session_timeout_ms
    else:
        assignor = cfg.partition_assignment_strategy[0]
        session = cfg.session_timeout_ms
    return SetUp(cfg.group_protocol, assignor, cfg.static, session)


def _session_cover_ms(group: Group) -> float:
    """A session timeout that a static member's restart fits in: its down time plus two
    heartbeats of the protocol in use, rounded up to whole seconds."""
    cfg = group.consumer_config()
    broker = group.broker_config()
    hb = (
        broker.consumer_heartbeat_interval_ms
        if cfg.group_protocol == "consumer"
        else cfg.heartbeat_interval_ms
    )
    return 1000.0 * math.ceil((group.deploy.down_s * 1000.0 + 2 * hb) / 1000.0)


def variants(group: Group) -> list[Variant]:
    """Today's set-up first, then every alternative that applies to it."""
    today = set_up(group)
    out = [Variant(TODAY, "today", f"nothing: {today.describe()}")]
    if today.protocol == "classic":
        if today.eager:
            out.append(
                Variant(
                    COOPERATIVE,
                    "cooperative-sticky",
                    "partition.assignment.strategy = cooperative-sticky (switched with two rolling "
                    "bounces, KIP-429)",
                    {"partition_assignment_strategy": ["cooperative-sticky"]},
                )
            )
        out.extend(
            Variant(
                f"consumer-{server}",
                f"consumer protocol ({server})",
                f"group.protocol = consumer, group.remote.assignor = {server} (KIP-848)",
                {"group_protocol": "consumer", "group_remote_assignor": server},
            )
            for server in ("uniform", "range")
        )
    else:
        other = "range" if today.assignor == "uniform" else "uniform"
        out.append(
            Variant(
                f"consumer-{other}",
                f"consumer protocol ({other})",
                f"group.remote.assignor = {other}",
                {"group_remote_assignor": other},
            )
        )
    if not today.static:
        out.append(
            Variant(
                STATIC,
                "static membership",
                "group.instance.id set on every member (KIP-345)",
                {"static": True},
            )
        )
    short = SHORT_CONSUMER_SESSION_MS if today.protocol == "consumer" else SHORT_CLASSIC_SESSION_MS
    if today.session_timeout_ms > short:
        faults = ("crash",) if group.deploy.graceful else ("deploy", "crash")
        if today.protocol == "consumer":
            out.append(
                Variant(
                    SHORT_SESSION,
                    f"group.consumer.session.timeout.ms {short / 1000:g} s",
                    f"group.consumer.session.timeout.ms = {short:g} and "
                    f"group.consumer.min.session.timeout.ms = {short:g} (broker settings)",
                    broker={
                        "consumer_session_timeout_ms": short,
                        "consumer_min_session_timeout_ms": short,
                    },
                    faults=faults,
                    full=False,
                )
            )
        else:
            cfg = group.consumer_config()
            change: dict[str, float] = {"session_timeout_ms": short}
            text = f"session.timeout.ms = {short:g}"
            if cfg.heartbeat_interval_ms >= short / 3:
                change["heartbeat_interval_ms"] = short / 3.0
                text += f", heartbeat.interval.ms = {short / 3:g}"
            out.append(
                Variant(
                    SHORT_SESSION,
                    f"session.timeout.ms {short / 1000:g} s",
                    text,
                    change,
                    faults=faults,
                    full=False,
                )
            )
    cover = _session_cover_ms(group)
    if cover > today.session_timeout_ms:
        # a static member down longer than its session is removed, and the group rebalances
        # without it (GroupCoordinator's session expiry; KIP-345)
        if today.protocol == "consumer":
            broker = {"consumer_session_timeout_ms": cover}
            broker_cfg = group.broker_config()
            if cover > broker_cfg.consumer_max_session_timeout_ms:
                broker["consumer_max_session_timeout_ms"] = cover
            text = f"group.consumer.session.timeout.ms = {cover:g} (broker)"
            out.append(
                Variant(
                    STATIC_SESSION,
                    f"static, session timeout {cover / 1000:g} s",
                    f"group.instance.id set, {text}",
                    {"static": True},
                    broker,
                    faults=("deploy",),
                    full=False,
                )
            )
        else:
            out.append(
                Variant(
                    STATIC_SESSION,
                    f"static, session.timeout.ms {cover / 1000:g} s",
                    f"group.instance.id set, session.timeout.ms = {cover:g}",
                    {"static": True, "session_timeout_ms": cover},
                    faults=("deploy",),
                    full=False,
                )
            )
    return out


def by_key(group: Group) -> dict[str, Variant]:
    return {v.key: v for v in variants(group)}
