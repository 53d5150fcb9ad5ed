"""The server-side assignor API: registry, GroupSpec checks and the GroupAssignment views."""

from __future__ import annotations

import numpy as np
import pytest

from assignors import AssignorError
from assignors.server import (
    DEFAULT_SERVER_ASSIGNORS,
    SERVER_ASSIGNORS,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    SubscribedTopicDescriber,
    SubscriptionType,
    get_server_assignor,
)

M = MemberSubscriptionAndAssignment


def test_registry_names_follow_kafkas_default_order():
    """group.consumer.assignors defaults to uniform, then range."""
    assert list(SERVER_ASSIGNORS) == ["uniform", "range"]
    assert DEFAULT_SERVER_ASSIGNORS == ("uniform", "range")
    assert get_server_assignor("uniform").name == "uniform"
    with pytest.raises(AssignorError, match="unknown server assignor 'sticky'"):
        get_server_assignor("sticky")


def test_docstring_example():
    """The example in assignors.server's docstring gives what it says."""
    spec = GroupSpec(
        {
            "m1": M({"orders"}, assigned_partitions={"orders": (0, 1, 2)}),
            "m2": M({"orders"}, assigned_partitions={"orders": (3, 4, 5)}),
            "m3": M({"orders"}),
        }
    )
    target = get_server_assignor("uniform").assign(spec, {"orders": 6})
    assert target["m3"] == {"orders": (2, 5)}
    assert target["m1"] == {"orders": (0, 1)} and target["m2"] == {"orders": (3, 4)}
    owners = target.owners("orders")
    assert [target.member_ids[i] for i in owners] == ["m1", "m1", "m3", "m2", "m2", "m3"]
    with pytest.raises(ValueError):
        owners[0] = 1  # read-only view


def test_subscription_type_is_computed_like_the_group():
    """Homogeneous iff all members subscribe to the same names (ModernGroup.subscriptionType)."""
    assert (
        GroupSpec({"a": M({"t"}), "b": M({"t"})}).subscription_type is SubscriptionType.HOMOGENEOUS
    )
    assert (
        GroupSpec({"a": M({"t"}), "b": M({"t", "u"})}).subscription_type
        is SubscriptionType.HETEROGENEOUS
    )
    assert GroupSpec({"a": M(()), "b": M(())}).subscription_type is SubscriptionType.HOMOGENEOUS


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_bad_input_names_the_field(name):
    """Duplicate claims, non-integer partitions and bad metadata raise one-line AssignorErrors."""
    a = get_server_assignor(name)
    dup = GroupSpec({"a": M({"t"}, {"t": [0]}), "b": M({"t"}, {"t": [0]})})
    if name == "uniform":  # range never reads the current assignment
        with pytest.raises(
            AssignorError, match=r"partition t-0 is in the target assignment of both"
        ):
            a.assign(dup, {"t": 2})
        with pytest.raises(AssignorError, match=r"assigned_partitions\['t'\]"):
            a.assign(GroupSpec({"a": M({"t"}, {"t": ["x"]})}), {"t": 2})
    with pytest.raises(AssignorError, match=r"topics\['t'\]"):
        a.assign(GroupSpec({"a": M({"t"})}), {"t": -1})
    with pytest.raises(AssignorError, match="members"):
        GroupSpec({"a": {"t": 1}})


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_unknown_topics_and_stale_claims_are_dropped(name):
    """Subscribed names that do not exist get nothing; claims beyond a topic's count are ignored."""
    spec = GroupSpec({"a": M({"t", "ghost"}, {"t": (0, 7), "ghost": (0,)}), "b": M({"t", "ghost"})})
    target = get_server_assignor(name).assign(spec, SubscribedTopicDescriber({"t": 4}))
    got = sorted(p for m in target for p in target[m].get("t", ()))
    assert got == [0, 1, 2, 3]
    assert all(set(target[m]) <= {"t"} for m in target)


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_empty_group(name):
    """No members: an empty assignment."""
    assert len(get_server_assignor(name).assign(GroupSpec({}), {"t": 3})) == 0


def test_partition_counts_and_to_dict_agree():
    """partition_counts() counts what to_dict() lists."""
    spec = GroupSpec({f"m{i}": M({"t", "u"}) for i in range(7)})
    target = get_server_assignor("uniform").assign(spec, {"t": 10, "u": 5})
    d = target.to_dict()
    assert target.partition_counts() == {m: sum(len(v) for v in d[m].values()) for m in d}
    assert np.array_equal(
        np.sort(np.concatenate([target.owners("t"), target.owners("u")])) >= 0, np.ones(15, bool)
    )


def test_readme_server_example_runs():
    """The README's server-side assignor example runs and gives what its comment says."""
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = next(b for b in readme.split("```python")[1:] if "assignors.server import" in b).split(
        "```"
    )[0]
    scope: dict = {}
    exec(block, scope)  # our own README
    assert scope["target"]["m3"] == {"orders": (2, 5)}
    assert list(scope["target"].owners("orders")) == [0, 0, 2, 1, 1, 2]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("name", ["uniform", "range"])
def test_from_target_is_the_spec_of_views(name, seed):
    """GroupSpec.from_target gives the assignor exactly what the per-member spec of the previous
    target's views gives it: members in ``take`` hand in their part of the target, the others
    their ``assigned`` mapping (or nothing), with instance ids and changed subscriptions."""
    rng = np.random.default_rng(seed)
    topics = {"a": 7, "b": 5, "c": 12}
    names = sorted(topics)
    mixed = seed % 2 == 1  # heterogeneous subscriptions in odd seeds
    subs = {
        f"m{i:03d}": frozenset(rng.choice(names, rng.integers(1, 4), replace=False).tolist())
        if mixed
        else frozenset(names)
        for i in range(int(rng.integers(70, 90)))
    }
    assignor = get_server_assignor(name)
    previous = assignor.assign(GroupSpec({m: M(t) for m, t in subs.items()}), topics)
    # the next epoch: some leave, some join, one member's target is handed in explicitly, one
    # member of the previous target is not taken from it (its target was dropped)
    members = dict(subs)
    left = rng.choice(sorted(members), 5, replace=False).tolist()
    for m in left:
        del members[m]
    for i in range(4):
        members[f"n{i:03d}"] = subs[left[0]] if i == 0 else frozenset(names)
    # n000 replaces a member that left and brings its target (a static member's new member id)
    explicit, dropped = "n000", sorted(members)[7]
    take = {m for m in members if m in previous and m != dropped}
    assigned = {explicit: dict(previous[left[0]])}
    instance_ids = {m: f"i-{m}" for m in sorted(members)[::9]}
    spec_views = GroupSpec(
        {
            m: M(t, previous[m] if m in take else assigned.get(m, {}), instance_ids.get(m))
            for m, t in members.items()
        }
    )
    bulk = GroupSpec.from_target(members, previous, take, assigned, instance_ids)
    assert bulk.member_ids == spec_views.member_ids
    assert bulk.subscription_type is spec_views.subscription_type
    assert assignor.assign(bulk, topics).to_dict() == assignor.assign(spec_views, topics).to_dict()
    m = bulk.member_ids[0]
    assert bulk.member_subscription(m) == spec_views.member_subscription(m)
    assert dict(bulk.member_assignment(m)) == dict(spec_views.member_assignment(m))
    assert bulk.instance_id(m) == spec_views.instance_id(m)


def test_from_target_names_bad_input():
    previous = get_server_assignor("uniform").assign(GroupSpec({"m": M({"t"})}), {"t": 2})
    with pytest.raises(AssignorError, match=r"topics\['m'\]: expected a frozenset"):
        GroupSpec.from_target({"m": ["t"]}, previous, {"m"})
    with pytest.raises(AssignorError, match="target: expected a GroupAssignment"):
        GroupSpec.from_target({"m": frozenset({"t"})}, {}, {"m"})
    spec = GroupSpec.from_target({"m": frozenset({"t"})}, previous, {"m"})
    with pytest.raises(AssignorError, match="member id 'x' not found"):
        spec.subscribed_topic_names("x")


def test_range_orders_member_ids_with_nuls_like_string_compare_to():
    """More than 64 ASCII member ids take a numpy sort, which drops trailing NULs; "a" must still
    come before "a\\x00" (String.compareTo: a proper prefix is smaller), "b\\x00" before "b\\x00\\x00"."""
    ids = ["a\x00", "b\x00\x00", "a", "b\x00"] + [f"m{i:02d}" for i in range(66)]
    spec = GroupSpec({m: M({"t"}) for m in ids})
    target = get_server_assignor("range").assign(spec, {"t": len(ids)})
    by_partition = sorted(ids, key=lambda m: target[m]["t"][0])
    assert by_partition == ["a", "a\x00", "b\x00", "b\x00\x00"] + [f"m{i:02d}" for i in range(66)]
