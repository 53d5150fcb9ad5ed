"""Server-side assignors of Kafka's consumer group protocol (KIP-848, ``group.protocol=consumer``).

Under KIP-848 the group coordinator, not a group leader, computes each group epoch's target
assignment with one of the assignors in ``group.consumer.assignors`` (``uniform`` first, then
``range``); a member may ask for one by name with ``group.remote.assignor``. These assignors have
a registry of their own: ``range`` names a different algorithm here than on the client side.

    from assignors.server import (GroupSpec, MemberSubscriptionAndAssignment,
                                  get_server_assignor, SERVER_ASSIGNORS)

    spec = GroupSpec({
        "m1": MemberSubscriptionAndAssignment({"orders"}, assigned_partitions={"orders": (0, 1, 2)}),
        "m2": MemberSubscriptionAndAssignment({"orders"}, assigned_partitions={"orders": (3, 4, 5)}),
        "m3": MemberSubscriptionAndAssignment({"orders"}),            # joins: empty target
    })
    target = get_server_assignor("uniform").assign(spec, {"orders": 6})
    target["m3"]              # {"orders": (2, 5)}: one partition from each of m1 and m2
    target.owners("orders")   # numpy: index into target.member_ids per partition (-1: none)

Next epoch, hand each member's ``target[member_id]`` (a ``MemberAssignment`` view) back as its
``assigned_partitions``: the assignor then reads the previous target from its arrays, which is
what keeps a 10,000-member group's reassignment in milliseconds. Plain dicts work too. A
coordinator that keeps its members between epochs puts them in a ``GroupMembers`` and builds each
epoch's spec with ``GroupSpec.from_members(members, previous_target)`` (see ``spec``).

Layout:
  spec     GroupSpec, MemberSubscriptionAndAssignment, SubscribedTopicDescriber,
           SubscriptionType, GroupAssignment, MemberAssignment (Kafka's names, topics keyed
           by name); GroupMembers (a coordinator's members kept between epochs)
  uniform  UniformAssignor: homogeneous and heterogeneous builders       "uniform"
  range    RangeAssignor (server side): co-partitioned ranges            "range"
  _group   the group spec as numpy arrays

Contract (as Kafka's ``ConsumerGroupPartitionAssignor``): ``assign(group_spec, topics)`` is a
pure function of the spec and the topic metadata (a ``SubscribedTopicDescriber`` or a mapping of
topic name to partition count). The spec carries each member's subscribed topic names, current
*target* assignment, instance id and rack. Results are deterministic whatever the order of the
mappings passed in: where Kafka's result depends on Java hash-table order we reproduce it, with
the differences listed in ``uniform``'s docstring (we have topic names where Kafka has random
topic ids). Neither assignor is rack-aware: Kafka removed rack awareness from them (KAFKA-16694);
racks are accepted and ignored. Bad input raises ``AssignorError`` with a one-line message.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Protocol

from ..types import AssignorError
from .spec import (
    GroupAssignment,
    GroupMembers,
    GroupSpec,
    MemberAssignment,
    MemberSubscriptionAndAssignment,
    SubscribedTopicDescriber,
    SubscriptionType,
    member_subscription_of,
    subscription_type_of,
)


class ServerAssignor(Protocol):
    """What every server-side assignor offers (Kafka's ``ConsumerGroupPartitionAssignor``)."""

    name: str

    def assign(
        self, group_spec: GroupSpec, topics: SubscribedTopicDescriber | Mapping[str, int]
    ) -> GroupAssignment: ...


# Kafka's default ``group.consumer.assignors`` order: the first is the group's default.
_REGISTRY: dict[str, str] = {
    "uniform": "uniform:UniformAssignor",
    "range": "range:RangeAssignor",
}


class _Registry(Mapping[str, type]):
    """Read-only mapping of server assignor name to class, loaded on first use."""

    def __getitem__(self, name: str) -> type:
        module, cls = _REGISTRY[name].split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(_REGISTRY)

    def __len__(self) -> int:
        return len(_REGISTRY)


SERVER_ASSIGNORS: Mapping[str, type] = _Registry()
DEFAULT_SERVER_ASSIGNORS: tuple[str, ...] = tuple(_REGISTRY)  # group.consumer.assignors default


def get_server_assignor(name: str) -> ServerAssignor:
    """A server-side assignor by name (``"uniform"`` or ``"range"``)."""
    if name not in _REGISTRY:
        raise AssignorError(
            f"unknown server assignor {name!r}; known server assignors: {', '.join(_REGISTRY)}"
        )
    return SERVER_ASSIGNORS[name]()


__all__ = [
    "DEFAULT_SERVER_ASSIGNORS",
    "SERVER_ASSIGNORS",
    "GroupAssignment",
    "GroupMembers",
    "GroupSpec",
    "MemberAssignment",
    "MemberSubscriptionAndAssignment",
    "ServerAssignor",
    "SubscribedTopicDescriber",
    "SubscriptionType",
    "get_server_assignor",
    "member_subscription_of",
    "subscription_type_of",
]
