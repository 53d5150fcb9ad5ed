"""GroupMembers and GroupSpec.from_members: a coordinator's members kept between group epochs give
the assignor exactly what a spec built from scratch gives it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from assignors import AssignorError
from assignors._java import hashmap_order
from assignors.server import (
    GroupAssignment,
    GroupMembers,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    get_server_assignor,
    subscription_type_of,
)

M = MemberSubscriptionAndAssignment
TOPICS = {"a": 7, "b": 5, "c": 12, "d": 0}


def _member_id(rng: np.random.Generator, n: int) -> str:
    kind = int(rng.integers(0, 10))
    if kind == 0:
        return f"m\u00e9-{n}"  # outside ASCII
    if kind == 1:
        return f"m\U0001f600-{n}"  # outside the Basic Multilingual Plane (surrogate pair in Java)
    return f"consumer-{int(rng.integers(0, 1 << 30)):x}-{n}"


@pytest.mark.parametrize("seed", range(16))
def test_members_kept_between_epochs_give_the_from_scratch_target(seed):
    """Random joins, leaves and changes of subscription, instance id and rack, epoch after epoch
    (sizes crossing several HashMap table sizes): the kept members have the HashMap order, the
    subscription type and the topic names of a from-scratch spec, and the assignor's target from
    ``from_members`` (previous result as arrays, one member's target handed in explicitly, one
    member's dropped) equals its target from per-member specs of the same inputs."""
    rng = np.random.default_rng(seed)
    name = "range" if seed % 4 == 3 else "uniform"
    assignor = get_server_assignor(name)
    names = sorted(TOPICS)
    mixed = seed % 2 == 1
    members = GroupMembers()
    model: dict[str, tuple[frozenset, str | None, str | None]] = {}
    previous: GroupAssignment | None = None
    n = 0

    def subscription():
        if not mixed:
            return frozenset(names[:3]) if rng.random() < 0.97 else frozenset(names)
        return frozenset(rng.choice(names, int(rng.integers(1, 4)), replace=False).tolist())

    for epoch, size in enumerate([1, 3, 13, 12, 30, 25, 70, 97, 140, 60, 11, 2, 0, 20]):
        # leave, change, join towards ``size``
        ids = sorted(model)
        leaving = rng.choice(
            ids, min(len(ids), max(0, len(ids) - size) + int(rng.integers(0, 3))), replace=False
        ).tolist()
        before = set(model)
        for mid in leaving:
            members.remove(mid)
            del model[mid]
        for mid in sorted(model):
            if rng.random() < 0.1:
                spec = (
                    subscription(),
                    f"i-{mid}" if rng.random() < 0.3 else None,
                    str(rng.choice(["r1", "r2"])) if rng.random() < 0.3 else None,
                )
                members.put(mid, *spec)
                model[mid] = spec
        while len(model) < size:
            n += 1
            mid = _member_id(rng, n)
            spec = (subscription(), f"i-{mid}" if rng.random() < 0.2 else None, None)
            members.put(mid, *spec)
            model[mid] = spec
        members.remove("never-there")  # nothing happens

        assert members.member_ids == tuple(hashmap_order(model))
        assert list(members) == list(members.member_ids) and len(members) == len(model)
        by_id = {mid: M(t, instance_id=i, rack_id=r) for mid, (t, i, r) in model.items()}
        assert members.subscription_type is subscription_type_of(by_id)
        assert dict(members.subscribed_topic_names()) == dict(
            Counter(t for s, _, _ in model.values() for t in s)
        )

        # the current targets: the previous result's views, except a member that joined with the
        # target of one that left (a static member's new member id) and one whose target was
        # dropped (empty)
        assigned: dict = {}
        gone = [mid for mid in leaving if previous is not None and mid in previous]
        joined = [mid for mid in model if mid not in before]
        if gone and joined:
            assigned[joined[0]] = dict(previous[gone[0]])
        stayed = [mid for mid in sorted(model) if previous is not None and mid in previous]
        if stayed:
            assigned[stayed[-1]] = {}

        def current(mid, assigned=assigned, previous=previous):
            if mid in assigned:
                return assigned[mid]
            return previous[mid] if previous is not None and mid in previous else {}

        scratch = GroupSpec({mid: M(t, current(mid), i, r) for mid, (t, i, r) in model.items()})
        kept = GroupSpec.from_members(members, previous, assigned)
        assert kept.member_ids == scratch.member_ids
        assert kept.subscription_type is scratch.subscription_type
        result = assignor.assign(kept, TOPICS)
        assert result.to_dict() == assignor.assign(scratch, TOPICS).to_dict(), f"epoch {epoch}"
        if model:
            mid = kept.member_ids[-1]
            assert kept.member_subscription(mid) == scratch.member_subscription(mid)
            assert kept.instance_id(mid) == model[mid][1]
            assert kept.subscribed_topic_names(mid) == model[mid][0]
        previous = result


def test_a_spec_from_members_is_valid_until_they_change():
    members = GroupMembers()
    members.put("m1", frozenset({"t"}))
    spec = GroupSpec.from_members(members)
    assert get_server_assignor("uniform").assign(spec, {"t": 2}).to_dict() == {"m1": {"t": (0, 1)}}
    members.put("m1", frozenset({"t"}))  # no change: still valid
    assert spec.subscribed_topic_names("m1") == frozenset({"t"})
    members.put("m2", ["t"])
    with pytest.raises(AssignorError, match="members: changed since this GroupSpec was built"):
        get_server_assignor("uniform").assign(spec, {"t": 2})
    with pytest.raises(AssignorError, match="changed since"):
        spec.subscribed_topic_names("m1")


def test_group_members_name_bad_input():
    members = GroupMembers()
    with pytest.raises(AssignorError, match="members: member id 1 is not a non-empty string"):
        members.put(1, frozenset({"t"}))
    with pytest.raises(AssignorError, match="members: member id '' is not"):
        members.put("", frozenset({"t"}))
    with pytest.raises(AssignorError, match=r"topics\['m'\]: expected a frozenset of topic names"):
        members.put("m", "t")
    with pytest.raises(AssignorError, match=r"topics\['m'\]: expected a frozenset of topic names"):
        members.put("m", frozenset({1}))
    with pytest.raises(AssignorError, match=r"topics\['m'\]: expected"):
        members.put("m", 5)
    with pytest.raises(AssignorError, match=r"instance_ids\['m'\]: expected a string or None"):
        members.put("m", frozenset({"t"}), instance_id=3)
    with pytest.raises(AssignorError, match=r"racks\['m'\]: expected a string or None"):
        members.put("m", frozenset({"t"}), rack_id=b"r")
    assert len(members) == 0 and "m" not in members  # nothing half-added
    members.put("m", frozenset({"t"}))
    with pytest.raises(AssignorError, match="members: expected a GroupMembers"):
        GroupSpec.from_members({"m": frozenset({"t"})})
    with pytest.raises(AssignorError, match="target: expected a GroupAssignment"):
        GroupSpec.from_members(members, {})
    with pytest.raises(AssignorError, match="assigned: expected a mapping"):
        GroupSpec.from_members(members, None, [("m", {})])
    spec = GroupSpec.from_members(members, None, {"m": {"t": ["x"]}})
    with pytest.raises(AssignorError, match=r"members\['m'\]\.assigned_partitions\['t'\]"):
        get_server_assignor("uniform").assign(spec, {"t": 2})


def test_members_read_one_by_one_match_the_sorted_reads():
    """A GroupAssignment reads its first members with one scan each, later ones from one sort of
    the owner array: both give the same mappings."""
    rng = np.random.default_rng(5)
    topics = {"a": 40, "b": 3, "c": 0, "d": 25}
    ids = [f"m{i}" for i in range(30)]
    owner = rng.integers(-1, len(ids), sum(topics.values())).astype(np.int32)
    one_by_one = GroupAssignment(ids, topics, owner)
    read = {m: dict(one_by_one[m]) for m in ids}  # 16 scans, then the sorted runs
    assert read == GroupAssignment(ids, topics, owner).to_dict()


@pytest.mark.parametrize("seed", range(6))
def test_same_partitions_as_compares_each_member(seed):
    """``same_partitions_as`` says, per member, whether its partitions are those it had in the
    previous result, as comparing the two mappings member by member does; None when the topics or
    their partition counts differ."""
    rng = np.random.default_rng(seed)
    topics = {"a": 9, "b": 4}
    old_ids = [f"m{i}" for i in range(12)]
    old_owner = rng.integers(-1, len(old_ids), 13).astype(np.int32)
    new_ids = [m for m in old_ids if rng.random() < 0.8] + ["n1", "n2"]
    rng.shuffle(new_ids)
    index = {m: i for i, m in enumerate(new_ids)}
    remap = np.array([index.get(m, -1) for m in old_ids] + [-1])
    new_owner = remap[old_owner].astype(np.int32)
    moved = rng.random(13) < 0.3
    new_owner[moved] = rng.integers(-1, len(new_ids), int(moved.sum()))
    old, new = (
        GroupAssignment(old_ids, topics, old_owner),
        GroupAssignment(new_ids, topics, new_owner),
    )
    same = new.same_partitions_as(old)
    assert same.tolist() == [m in old and dict(new[m]) == dict(old[m]) for m in new_ids]
    assert (
        new.same_partitions_as(GroupAssignment(old_ids, {"a": 9, "b": 5}, np.append(old_owner, -1)))
        is None
    )
    assert new.same_partitions_as(GroupAssignment.empty()) is None


def test_members_that_come_and_go_for_long_stay_right():
    """Many members joining and leaving a small group (so that the kept member numbering starts
    over): each epoch's target is still the from-scratch one, and an assignment from before reads
    its members as it did."""
    assignor = get_server_assignor("uniform")
    members = GroupMembers()
    alive = [f"m{i}" for i in range(4)]
    for mid in alive:
        members.put(mid, frozenset({"a"}))
    first = previous = assignor.assign(GroupSpec.from_members(members), {"a": 9})
    first_dict = first.to_dict()
    for k in range(1300):
        members.remove(alive.pop(k % len(alive)))
        alive.append(f"n{k}")
        members.put(alive[-1], frozenset({"a"}))
        if k % 7 and k < 1290:
            continue  # several changes between two epochs
        scratch = GroupSpec({m: M({"a"}, previous.get(m, {})) for m in alive})
        result = assignor.assign(GroupSpec.from_members(members, previous), {"a": 9})
        assert result.to_dict() == assignor.assign(scratch, {"a": 9}).to_dict()
        gone = [m for m in ("m0", "m1", "m2", "m3", f"n{k - 40}") if m not in alive]
        assert all(m in result for m in alive) and not any(m in result for m in gone)
        previous = result
    assert (
        {m: dict(first[m]) for m in first_dict} == first_dict
        and "m0" in first
        and "n5" not in first
    )


def test_a_member_that_leaves_and_comes_back_is_found_again():
    assignor = get_server_assignor("uniform")
    members = GroupMembers()
    for mid in ("a1", "b2", "c3"):
        members.put(mid, frozenset({"t"}))
    one = assignor.assign(GroupSpec.from_members(members), {"t": 6})
    members.remove("b2")
    two = assignor.assign(GroupSpec.from_members(members, one), {"t": 6})
    members.put("b2", frozenset({"t"}))
    members.put("d4", frozenset({"t"}))
    three = assignor.assign(GroupSpec.from_members(members, two), {"t": 6})
    scratch = GroupSpec({m: M({"t"}, two.get(m, {})) for m in ("a1", "b2", "c3", "d4")})
    assert three.to_dict() == assignor.assign(scratch, {"t": 6}).to_dict()
    assert (
        "b2" in one and "b2" not in two and "b2" in three and dict(one["b2"]) == one.to_dict()["b2"]
    )
