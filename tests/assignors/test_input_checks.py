"""Bad input to the classic assignors: one AssignorError naming the field, whoever builds it."""

from __future__ import annotations

import pytest

from assignors import ASSIGNORS, get_assignor
from assignors.types import AssignorError, Subscription, TopicPartition


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"topics": ["t", 3]}, r"Subscription\.topics: 3 is not a string"),
        ({"topics": None}, r"Subscription\.topics: expected a list of topic names"),
        (
            {"topics": ["t"], "owned_partitions": [TopicPartition("t", 0), ("t", 1)]},
            r"Subscription\.owned_partitions: \('t', 1\) is not a TopicPartition",
        ),
        (
            {"topics": ["t"], "user_data": "text"},
            r"Subscription\.user_data: expected bytes or None, got str",
        ),
    ],
)
def test_a_subscription_checks_its_fields_when_built(kwargs, field):
    with pytest.raises(AssignorError, match=field):
        Subscription(**kwargs)


def test_a_good_subscription_keeps_its_fields():
    owned = [TopicPartition("t", 1), TopicPartition("t", 0)]
    sub = Subscription("t", user_data=bytearray(b"x"), owned_partitions=owned)
    assert sub.topics == ("t",)
    assert sub.owned_partitions == tuple(owned)
    assert sub.user_data == b"x"


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_assign_names_the_member_whose_value_is_not_a_subscription(name):
    subs = {"a": Subscription(["t"]), "b": {"topics": ["t"]}}
    with pytest.raises(
        AssignorError, match=r"subscriptions\['b'\]: expected a Subscription, got dict"
    ):
        get_assignor(name).assign({"t": 2}, subs)
    with pytest.raises(AssignorError, match=r"member id '' is not a non-empty string"):
        get_assignor(name).assign({"t": 2}, {"": Subscription(["t"])})


@pytest.mark.parametrize("name", ["roundrobin", "cooperative-sticky"])
def test_assigning_keeps_the_hosts_frozen_objects_frozen(name):
    # assign() pauses the cyclic collector and, on the way out, moves what it built past the
    # young generations (gc.freeze + unfreeze); a host that froze its own objects (gc.freeze(),
    # as forking servers do) must find them still frozen afterwards
    import gc

    subs = {f"m{i}": Subscription(["t"]) for i in range(3)}
    gc.collect()
    was_enabled = gc.isenabled()
    gc.enable()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        get_assignor(name).assign({"t": 30}, subs)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
        if not was_enabled:
            gc.disable()
