"""Hypothesis strategies shared by the assignor and simulator tests: groups, subscriptions,
ownership histories."""

from __future__ import annotations

from hypothesis import strategies as st

from assignors.types import Subscription, TopicPartition

topic_names = st.sampled_from([f"t{i}" for i in range(6)])
member_ids = st.sampled_from([f"m{i:02d}" for i in range(24)] + ["consumer-a", "consumer-b", "zz"])


@st.composite
def metadata(draw, max_topics: int = 5, max_partitions: int = 12) -> dict[str, int]:
    """Topics with partition counts (some topics may have zero partitions)."""
    topics = draw(st.lists(topic_names, min_size=1, max_size=max_topics, unique=True))
    return {t: draw(st.integers(0, max_partitions)) for t in topics}


@st.composite
def groups(
    draw,
    uniform: bool | None = None,
    with_owned: bool = True,
    max_members: int = 10,
    max_topics: int = 5,
    max_partitions: int = 12,
) -> tuple[dict[str, int], dict[str, Subscription]]:
    """A group: metadata plus subscriptions.

    ``uniform``: True -> every member subscribes to the same topics; False -> members draw their
    own topic sets; None -> either. Owned partitions are a consistent previous assignment
    (each partition owned at most once), optionally spoiled by a stale duplicate claim.
    Subscriptions may name topics absent from the metadata (deleted topics).
    """
    meta = draw(metadata(max_topics=max_topics, max_partitions=max_partitions))
    all_topics = sorted(meta) + draw(st.lists(st.sampled_from(["gone1", "gone2"]), max_size=1))
    members = draw(st.lists(member_ids, min_size=1, max_size=max_members, unique=True))
    if uniform is None:
        uniform = draw(st.booleans())
    common = draw(st.lists(st.sampled_from(all_topics), min_size=1, unique=True))
    topics_of = {
        m: (common if uniform else draw(st.lists(st.sampled_from(all_topics), min_size=1, unique=True)))
        for m in members
    }
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    if with_owned:
        partitions = [TopicPartition(t, p) for t in sorted(meta) for p in range(meta[t])]
        partitions += [TopicPartition("gone1", 0)]
        for tp in partitions:
            owner = draw(st.sampled_from([None, *members]))
            if owner is not None:
                owned[owner].append(tp)
        if partitions and draw(st.booleans()):
            # A stale duplicate claim: a member (a zombie) also claims someone else's partition.
            zombie = draw(st.sampled_from(members))
            owned[zombie].append(draw(st.sampled_from(partitions)))
    generation = {m: draw(st.integers(-1, 5)) for m in members}
    static = draw(st.booleans())
    subs = {
        m: Subscription(
            topics=topics_of[m],
            owned_partitions=owned[m],
            generation=generation[m] if owned[m] else draw(st.sampled_from([-1, generation[m]])),
            group_instance_id=(f"instance-{m}" if static and draw(st.booleans()) else None),
        )
        for m in members
    }
    return meta, subs



@st.composite
def server_groups(
    draw,
    homogeneous: bool | None = None,
    bucketed: bool = False,
    max_members: int = 10,
    max_topics: int = 5,
    max_partitions: int = 12,
) -> tuple[dict[str, int], dict]:
    """A KIP-848 group for the server-side assignors: ``(partitions_per_topic, {member_id:
    MemberSubscriptionAndAssignment})``.

    ``homogeneous``: every member subscribes to the same topics (None: either). ``bucketed``:
    members fall into subscription groups with disjoint topics (every subscriber of a topic has
    the same subscription). Current target assignments are consistent (each partition at most
    once) but stale: they may name unsubscribed, deleted or out-of-range partitions. Some
    members are static, some subscribe to a topic that does not exist.
    """
    from assignors.server import MemberSubscriptionAndAssignment

    meta = draw(metadata(max_topics=max_topics, max_partitions=max_partitions))
    names = sorted(meta)
    members = draw(st.lists(member_ids, min_size=1, max_size=max_members, unique=True))
    if bucketed:
        bucket_of_topic = {t: draw(st.integers(0, 2)) for t in names}
        buckets = sorted(set(bucket_of_topic.values()))
        topics_of = {}
        for m in members:
            b = draw(st.sampled_from(buckets))
            topics_of[m] = frozenset(t for t in names if bucket_of_topic[t] == b)
    else:
        if homogeneous is None:
            homogeneous = draw(st.booleans())
        pool = names + ["gone1"]
        common = frozenset(draw(st.lists(st.sampled_from(pool), min_size=1, unique=True)))
        topics_of = {
            m: common if homogeneous else frozenset(draw(st.lists(st.sampled_from(pool), unique=True)))
            for m in members
        }
    assigned: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    for t in names + ["gone1"]:
        for p in range(meta.get(t, 2) + draw(st.integers(0, 1))):
            owner = draw(st.sampled_from([None, *members]))
            if owner is not None:
                assigned[owner].setdefault(t, []).append(p)
    static = draw(st.booleans())
    return meta, {
        m: MemberSubscriptionAndAssignment(
            topics_of[m],
            {t: tuple(ps) for t, ps in assigned[m].items()},
            instance_id=(f"instance-{m}" if static and draw(st.booleans()) else None),
        )
        for m in members
    }


def shuffled(mapping: dict, permutation: list[int]) -> dict:
    """The same mapping with its keys inserted in another order."""
    items = list(mapping.items())
    return dict(items[i] for i in permutation)


# ---- simulator: scenarios with randomized fault schedules ----

SIM_STRATEGIES = [["range"], ["roundrobin"], ["sticky"], ["cooperative-sticky"], ["range", "cooperative-sticky"]]
FAULT_KINDS = ["crash", "pause", "add_members", "remove_members", "join_and_leave", "rolling_restart",
               "network_partition", "delay_spike", "packet_loss", "crash_leader"]


@st.composite
def fault_schedules(draw, members: int, session_s: float, poll_s: float, max_faults: int = 6,
                    start_s: float = 10.0, end_s: float = 200.0) -> list[dict]:
    """Timeline actions on the initial members c000..: crashes, pauses shorter and longer than the
    session timeout and max.poll.interval, joins and leaves (sometimes at the same instant),
    restarts, one- and two-way network partitions, delay spikes, windows of packet loss, and
    leader crashes timed inside the JoinGroup or SyncGroup phase of a rebalance that starts at the
    same instant."""
    names = [f"c{i:03d}" for i in range(members)]
    times = st.floats(start_s, end_s).map(lambda x: round(x, 3))
    actions: list[dict] = []
    for _ in range(draw(st.integers(0, max_faults))):
        # a quarter of the faults reuse the instant of an earlier one (ties in the kernel)
        at = draw(st.sampled_from([a["at_s"] for a in actions])) if actions and draw(
            st.integers(0, 3)) == 0 else draw(times)
        kind = draw(st.sampled_from(FAULT_KINDS))
        member = draw(st.sampled_from(names))
        if kind == "crash":
            actions.append({"action": "crash", "at_s": at, "member": member})
        elif kind == "pause":
            duration = draw(st.sampled_from([0.5, session_s * 0.5, session_s + 2.0, poll_s + 2.0]))
            actions.append({"action": "pause", "at_s": at, "member": member, "duration_s": duration})
        elif kind == "add_members":
            actions.append({"action": "add_members", "at_s": at, "count": draw(st.integers(1, 2))})
        elif kind == "remove_members":
            actions.append({"action": "remove_members", "at_s": at, "members": [member]})
        elif kind == "join_and_leave":
            actions.append({"action": "add_members", "at_s": at})
            actions.append({"action": "remove_members", "at_s": at, "members": [member]})
        elif kind == "rolling_restart":
            actions.append({"action": "rolling_restart", "at_s": at, "members": [member],
                            "down_s": draw(st.sampled_from([1.0, session_s + 5.0])),
                            "graceful": draw(st.booleans())})
        elif kind == "network_partition":
            actions.append({"action": "network_partition", "at_s": at, "member": member,
                            "duration_s": draw(st.sampled_from([2.0, session_s + 5.0])),
                            "direction": draw(st.sampled_from(["both", "to_coordinator", "from_coordinator"]))})
        elif kind == "delay_spike":
            actions.append({"action": "delay_spike", "at_s": at, "duration_s": draw(st.sampled_from([1.0, 8.0])),
                            "extra_ms": draw(st.sampled_from([50.0, 2000.0])),
                            "member": draw(st.sampled_from([None, member]))})
        elif kind == "packet_loss":
            actions.append({"action": "packet_loss", "at_s": at, "duration_s": draw(st.sampled_from([5.0, 60.0])),
                            "probability": draw(st.sampled_from([0.05, 0.2])),
                            "member": draw(st.sampled_from([None, member]))})
        else:
            actions.append({"action": "add_members", "at_s": at})  # starts a rebalance
            actions.append({"action": "crash_leader", "at_s": at, "phase": draw(st.sampled_from(["join", "sync"])),
                            "delay_s": draw(st.sampled_from([0.0, 0.0005, 0.001, 0.002]))})
    return [{k: v for k, v in a.items() if v is not None} for a in actions]


@st.composite
def faulty_scenarios(draw, max_faults: int = 6) -> dict:
    """A small group (2-5 members, 1-2 topics) with random client settings, network and faults."""
    members = draw(st.integers(2, 5))
    session_ms = draw(st.sampled_from([10000, 45000]))
    poll_ms = draw(st.sampled_from([30000, 60000, 300000]))
    topics = [{"name": "t", "partitions": draw(st.integers(1, 10)), "rate": draw(st.sampled_from([10.0, 200.0]))}]
    if draw(st.booleans()):
        topics.append({"name": "u", "partitions": draw(st.integers(0, 4)), "rate": 10.0})
    return {
        "name": "faults", "members": members, "topics": topics, "max_duration_s": 4000.0,
        "consumer": {"partition_assignment_strategy": draw(st.sampled_from(SIM_STRATEGIES)),
                     "static": draw(st.booleans()),
                     "session_timeout_ms": session_ms, "max_poll_interval_ms": poll_ms,
                     "capacity": draw(st.sampled_from([10000.0, 1000.0])),
                     "max_poll_records": draw(st.sampled_from([500, 100])),
                     "revoke_cost_ms": draw(st.sampled_from([0.0, 50.0])),
                     "assign_cost_ms": draw(st.sampled_from([0.0, 300.0]))},
        "network": {"latency": draw(st.sampled_from([{"kind": "constant", "ms": 1.0},
                                                     {"kind": "lognormal", "ms": 2.0, "sigma": 1.0}])),
                    # loss that never ends is kept small: a lost message waits for its request
                    # timeout, so heavy endless loss can keep a group rebalancing for hours
                    "drop_probability": draw(st.sampled_from([0.0, 0.0, 0.0, 0.005]))},
        "assignor_cost": draw(st.sampled_from(["zero", "model", "fixed:0.5"])),
        "timeline": draw(fault_schedules(members, session_ms / 1000.0, poll_ms / 1000.0, max_faults)),
    }
