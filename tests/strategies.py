"""Hypothesis strategies shared by the assignor and simulator tests: groups, subscriptions,
ownership histories."""

from __future__ import annotations

from hypothesis import strategies as st

from assignors.types import Subscription, TopicPartition
from sim.testing import schedules

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
        m: (
            common
            if uniform
            else draw(st.lists(st.sampled_from(all_topics), min_size=1, unique=True))
        )
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
            m: common
            if homogeneous
            else frozenset(draw(st.lists(st.sampled_from(pool), unique=True)))
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
# One definition (sim.testing.schedules) drawn two ways: here through Hypothesis, which shrinks a
# failing schedule; in `rebalance-sim soak` through a seeded random.Random.

SIM_STRATEGIES = [list(s) for s in schedules.CLASSIC_STRATEGIES]
FAULT_KINDS = list(schedules.FAULT_KINDS)


class _HypothesisChooser:
    """``sim.testing.schedules.Chooser`` over Hypothesis's ``draw``."""

    def __init__(self, draw):
        self._draw = draw

    def choice(self, options):
        return self._draw(st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def real(self, lo: float, hi: float) -> float:
        return self._draw(st.floats(lo, hi))


@st.composite
def fault_schedules(
    draw,
    members: int,
    session_s: float,
    poll_s: float,
    max_faults: int = 6,
    start_s: float = 10.0,
    end_s: float = 200.0,
) -> list[dict]:
    """Timeline actions on the initial members c000.. (``sim.testing.schedules.fault_schedule``)."""
    return schedules.fault_schedule(
        _HypothesisChooser(draw), members, session_s, poll_s, max_faults, start_s, end_s
    )


@st.composite
def faulty_scenarios(draw, max_faults: int = 6) -> dict:
    """A small group (2-5 members, 1-2 topics) with random client settings, network and faults
    (``sim.testing.schedules.faulty_scenario``)."""
    return schedules.faulty_scenario(_HypothesisChooser(draw), max_faults=max_faults)


# ---- KIP-848 coordinators: groups whose members come and go between group epochs ----


@st.composite
def membership_changes(
    draw, max_epochs: int = 25, pool: int = 10, max_partitions: int = 40
) -> tuple:
    """``(partitions_per_topic, subscription, epochs)`` for a server-side assignor kept between
    group epochs: ``epochs`` lists, per group epoch, the changes since the last one, each
    ``("join", member_id)``, ``("leave", member_id)``, ``("rejoin", member_id)`` (left and joined
    again under the same id: its target is dropped), ``("subscribe", member_id, topics)`` (another
    subscription: the group turns heterogeneous until it subscribes back) or ``("tie", member_id,
    n)`` (its place among the members sharing its HashMap bucket). Member ids come from a small
    pool, so they come back."""
    names = draw(st.lists(st.sampled_from(["t", "u", "v"]), min_size=1, max_size=3, unique=True))
    meta = {t: draw(st.integers(0, max_partitions)) for t in names}
    subscription = frozenset(names)
    ids = [f"m{i}" for i in range(pool)]
    epochs = []
    for _ in range(draw(st.integers(1, max_epochs))):
        changes = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(
                st.sampled_from(["join", "join", "join", "leave", "rejoin", "subscribe", "tie"])
            )
            mid = draw(st.sampled_from(ids))
            if kind == "subscribe":
                other = draw(
                    st.sampled_from([subscription, frozenset(names[:1]), frozenset(["t", "w"])])
                )
                changes.append((kind, mid, other))
            elif kind == "tie":
                changes.append((kind, mid, draw(st.integers(0, 1000))))
            else:
                changes.append((kind, mid))
        epochs.append(changes)
    return meta, subscription, epochs


HEARTBEAT_ACTIONS = (
    "join",
    "ack",
    "ack",
    "lag",
    "full",
    "leave",
    "expire",
    "grow",
    "retry",
    "zombie",
)


@st.composite
def heartbeat_sequences(draw, max_clients: int = 8, max_steps: int = 40) -> dict:
    """A consumer group protocol run for a coordinator core, request by request: ``topics``
    (name -> partitions), ``clients`` (name -> (subscribed topics, static)), a member id salt,
    the rebalance timeout the clients send, and ``steps``: (action, client, at the same instant
    as the step before, topic to grow). Actions (``HEARTBEAT_ACTIONS``): join (epoch 0), ack (the
    current epoch, owning what it was last assigned), lag (owning what it owned before), full (a
    full request), leave (-1, or -2 for a static member), expire (time runs to the client's
    session deadline and every due timer fires), grow (a topic gains partitions), retry (the
    client's last request again, its response lost), zombie (an epoch it had two requests ago)."""
    names = ["t", "u"][: draw(st.integers(1, 2))]
    topics = {t: draw(st.integers(1, 8)) for t in names}
    n = draw(st.integers(2, max_clients))
    clients = {}
    for i in range(n):
        subscribed = tuple(sorted(draw(st.lists(st.sampled_from(names), min_size=1, unique=True))))
        clients[f"c{i}"] = (subscribed, draw(st.integers(0, 4)) == 0)
    steps = [
        (
            draw(st.sampled_from(HEARTBEAT_ACTIONS)),
            draw(st.sampled_from(sorted(clients))),
            draw(st.integers(0, 3)) == 0,
            draw(st.sampled_from(names)),
        )
        for _ in range(draw(st.integers(1, max_steps)))
    ]
    return {
        "topics": topics,
        "clients": clients,
        "salt": draw(st.integers(0, 10**6)),
        "rebalance_timeout_s": draw(st.sampled_from([20.0, 300.0])),
        "steps": steps,
    }
