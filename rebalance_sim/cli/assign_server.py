"""`rebalance-sim assign --server`: one of the consumer protocol's server-side assignors (KIP-848:
``uniform``, ``range``, as the group coordinator runs them) on the JSON description of a group.

The input is `assign`'s format, read as the coordinator's view::

    {
      "assignor": "uniform",                       # optional; --assignor overrides
      "topics": {"orders": 6, "payments": 3},
      "members": {
        "consumer-1": {"topics": ["orders", "payments"],
                       "owned": ["orders-0", "orders-1"],   # its current target assignment
                       "group_instance_id": "host-1",        # optional (KIP-345)
                       "rack": "eu-west-1a"},                # optional (ignored, KAFKA-16694)
        "consumer-2": {"topics": ["orders"]}
      }
    }

A member's ``owned`` is its current *target* assignment (what ``TargetAssignmentBuilder`` hands
the assignor), so one partition may be in one member's ``owned`` only. The output is the new
target, its quality as for the client assignors, and ``kafka_ms``: how long Kafka's own assignor
takes on this input (``assignors.server.kafka_time``, a model fitted to Kafka's measured times).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import attrs

from assignors import Assignment, AssignorError, Subscription, TopicPartition
from assignors.quality import assignment_quality
from assignors.server import (
    SERVER_ASSIGNORS,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    get_server_assignor,
)
from assignors.server.kafka_time import server_kafka_ms

ALLOWED = ("topics", "owned", "group_instance_id", "rack")


def build_server_group(
    doc: Any, assignor_name: str | None, parse_group, input_error
) -> tuple[str, dict[str, int], GroupSpec, dict[str, Subscription]]:
    """(assignor name, metadata, group spec, subscriptions for the quality figures) from the
    JSON document. ``parse_group`` is `assign`'s parser, which checks the topics, the members and
    their partitions; ``input_error`` its one-line error naming the field."""
    if not isinstance(doc, dict):
        raise input_error("input: expected a JSON object with 'topics' and 'members'")
    name = assignor_name or doc.get("assignor")
    where = "--assignor" if assignor_name else "assignor"
    if not isinstance(name, str):
        raise input_error(
            f"assignor: missing; give it in the input or with --assignor "
            f"({', '.join(SERVER_ASSIGNORS)})"
        )
    if name not in SERVER_ASSIGNORS:
        raise input_error(
            f"{where}: {name!r} is not a server-side assignor "
            f"(with --server: {', '.join(SERVER_ASSIGNORS)})"
        )
    members = doc.get("members")
    racks: dict[str, str] = {}
    if isinstance(members, dict):
        stripped = {}
        for member, spec in members.items():
            if isinstance(spec, dict):
                extra = sorted(set(spec) - set(ALLOWED))
                if extra:
                    raise input_error(
                        f"members.{member}: unknown field {extra[0]!r} with --server "
                        f"(allowed: {', '.join(ALLOWED)})"
                    )
                rack = spec.get("rack")
                if rack is not None and not isinstance(rack, str):
                    raise input_error(f"members.{member}.rack: expected a string")
                if rack is not None:
                    racks[member] = rack
                spec = {k: v for k, v in spec.items() if k != "rack"}
            stripped[member] = spec
        doc = {**doc, "members": stripped}
    # The client parser checks the rest; told to parse for the client ``range``, whose member
    # side sends no user data (the server path has none).
    _, metadata, subs = parse_group(doc, "range")
    specs = {}
    for member, sub in subs.items():
        assigned: dict[str, list[int]] = {}
        for tp in sub.owned_partitions:
            assigned.setdefault(tp.topic, []).append(tp.partition)
        specs[member] = MemberSubscriptionAndAssignment(
            sub.topics, assigned, instance_id=sub.group_instance_id, rack_id=racks.get(member)
        )
    return name, metadata, GroupSpec(specs), subs


def run(args, read_input, parse_group, format_partitions, input_error) -> int:
    """The server path of `assign` (its helpers handed in, to read and check the input)."""
    try:
        doc = read_input(args.input)
        name, metadata, spec, subs = build_server_group(
            doc, args.assignor, parse_group, input_error
        )
        result = get_server_assignor(name).assign(spec, metadata)
    except OSError as e:
        print(f"rebalance-sim assign: {args.input}: {e.strerror or e}", file=sys.stderr)
        return 2
    except (input_error, AssignorError) as e:
        print(f"rebalance-sim assign: {e}", file=sys.stderr)
        return 2
    # a member the assignor left out gets nothing (TargetAssignmentBuilder)
    target = {
        m: [TopicPartition(t, p) for t, ps in result.get(m, {}).items() for p in ps] for m in subs
    }
    q = assignment_quality(metadata, subs, {m: Assignment(ps) for m, ps in target.items()})
    kafka_ms = server_kafka_ms(result.kafka_work)
    if args.json:
        json.dump(
            {
                "assignor": name,
                "server": True,
                "assignment": {m: [str(tp) for tp in ps] for m, ps in target.items()},
                "quality": attrs.asdict(q),
                "kafka_ms": round(kafka_ms, 6),
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    width = max(len("member"), *(len(m) for m in target))
    print(f"assignor: {name} (server side, KIP-848)")
    print(f"{'member':<{width}}  count  partitions")
    for m in sorted(target):
        print(f"{m:<{width}}  {len(target[m]):>5}  {format_partitions(target[m])}")
    print(
        f"\npartitions {q.partitions}, assigned {q.assigned}, withheld {q.withheld}; "
        f"per member min {q.min_count}, max {q.max_count}, spread {q.spread}; "
        f"previous target kept {q.kept}, moved {q.moved}"
    )
    print(f"Kafka's {name} assignor would take {kafka_ms:.3f} ms on this input")
    return 0
