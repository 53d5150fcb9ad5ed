"""`rebalance-sim assign`: run one assignor on a JSON description of a group.

Input (a file, or - for stdin)::

    {
      "assignor": "cooperative-sticky",            # optional; --assignor overrides
      "topics": {"orders": 6, "payments": 3},      # partitions per topic
      "members": {
        "consumer-1": {"topics": ["orders", "payments"],
                       "owned": ["orders-0", "orders-1"],   # or [["orders", 0], ...]
                       "generation": 4,                      # optional, default -1
                       "group_instance_id": "host-1",        # optional (KIP-345)
                       "epoch": 3,                           # optional, stream-join-sticky
                       "user_data_hex": "0000..."},          # optional: raw bytes instead
        "consumer-2": {"topics": ["orders"]}
      }
    }

Each member's user data is what that assignor's member side would send after owning ``owned``
in ``generation`` (eager sticky: V1 bytes; cooperative-sticky: the generation and the owned
partitions in the subscription), unless ``user_data_hex`` gives the bytes.

Every topic a member names, and every partition it owns, must exist in ``topics``; at most
2,000,000 partitions and 100,000 members.

The output ends with the time Kafka's own implementation of the assignor would take on this input
(a warm JVM; ``kafka_ms`` in ``--json``; see ``assignors.kafka_time``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from assignors import Assignment, AssignorError, Subscription, TopicPartition, get_assignor
from assignors.kafka_time import client_kafka_ms
from assignors.quality import assignment_quality
from assignors.stream_join import encode_assignment_user_data

# Bounds that keep a typo ("orders": 100000000) from eating the machine's memory: twice the
# largest group `bench assignors` times (2,000 members x 1,000,000 partitions).
MAX_PARTITIONS = 2_000_000
MAX_MEMBERS = 100_000


class InputError(ValueError):
    """A malformed `assign` input; the message names the field."""


def _partition(field: str, value: Any) -> TopicPartition:
    if isinstance(value, str):
        topic, sep, num = value.rpartition("-")
        if sep and topic and num.isdigit():
            return TopicPartition(topic, int(num))
    elif (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
    ):
        return TopicPartition(value[0], value[1])
    raise InputError(f'{field}: {value!r} is not a partition ("topic-N" or ["topic", N])')


def _names(metadata: dict[str, int]) -> str:
    return ", ".join(sorted(metadata)) or "none"


def _int(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{field}: expected an integer, got {value!r}")
    return value


def build_group(
    doc: Any, assignor_name: str | None
) -> tuple[str, dict[str, int], dict[str, Subscription]]:
    """Parse the JSON document into (assignor name, metadata, subscriptions)."""
    if not isinstance(doc, dict):
        raise InputError("input: expected a JSON object with 'topics' and 'members'")
    unknown = set(doc) - {"assignor", "topics", "members"}
    if unknown:
        raise InputError(
            f"input: unknown field {sorted(unknown)[0]!r} (allowed: assignor, topics, members)"
        )
    name = assignor_name or doc.get("assignor")
    if not isinstance(name, str):
        raise InputError("assignor: missing; give it in the input or with --assignor")
    topics = doc.get("topics")
    if not isinstance(topics, dict):
        raise InputError("topics: expected an object of topic name -> partition count")
    metadata = {}
    for t, n in topics.items():
        if _int(f"topics.{t}", n) < 0:
            raise InputError(f"topics.{t}: partition count {n} is negative")
        if n > MAX_PARTITIONS:
            raise InputError(
                f"topics.{t}: {n:,} partitions is above the limit of {MAX_PARTITIONS:,}"
            )
        metadata[t] = n
    total = sum(metadata.values())
    if total > MAX_PARTITIONS:
        raise InputError(
            f"topics: {total:,} partitions in all is above the limit of {MAX_PARTITIONS:,}"
        )
    members = doc.get("members")
    if not isinstance(members, dict) or not members:
        raise InputError("members: expected a non-empty object of member id -> member")
    if len(members) > MAX_MEMBERS:
        raise InputError(f"members: {len(members):,} members is above the limit of {MAX_MEMBERS:,}")
    subs = {}
    allowed = {"topics", "owned", "generation", "group_instance_id", "epoch", "user_data_hex"}
    for member, spec in members.items():
        where = f"members.{member}"
        if not isinstance(spec, dict):
            raise InputError(f"{where}: expected an object")
        extra = set(spec) - allowed
        if extra:
            raise InputError(
                f"{where}: unknown field {sorted(extra)[0]!r} (allowed: {', '.join(sorted(allowed))})"
            )
        sub_topics = spec.get("topics")
        if not isinstance(sub_topics, list) or not all(isinstance(t, str) for t in sub_topics):
            raise InputError(f"{where}.topics: expected a list of topic names")
        for i, t in enumerate(sub_topics):
            if t not in metadata:
                raise InputError(
                    f"{where}.topics[{i}]: unknown topic {t!r} (topics: {_names(metadata)})"
                )
        owned_in = spec.get("owned", [])
        if not isinstance(owned_in, list):
            raise InputError(f"{where}.owned: expected a list of partitions")
        owned = [_partition(f"{where}.owned[{i}]", v) for i, v in enumerate(owned_in)]
        for i, tp in enumerate(owned):
            if tp.topic not in metadata:
                raise InputError(
                    f"{where}.owned[{i}]: {tp} is of unknown topic {tp.topic!r} "
                    f"(topics: {_names(metadata)})"
                )
            if not 0 <= tp.partition < metadata[tp.topic]:
                raise InputError(
                    f"{where}.owned[{i}]: {tp} is out of range ({tp.topic} has "
                    f"{metadata[tp.topic]:,} partitions: 0..{metadata[tp.topic] - 1})"
                )
        generation = _int(f"{where}.generation", spec.get("generation", -1))
        instance_id = spec.get("group_instance_id")
        if instance_id is not None and not isinstance(instance_id, str):
            raise InputError(f"{where}.group_instance_id: expected a string")
        if "user_data_hex" in spec:
            try:
                user_data: bytes | None = bytes.fromhex(spec["user_data_hex"])
            except (TypeError, ValueError):
                raise InputError(f"{where}.user_data_hex: not a hex string") from None
        else:
            user_data = _member_user_data(name, owned, generation, spec, where)
        subs[member] = Subscription(
            topics=sub_topics,
            user_data=user_data,
            owned_partitions=owned,
            group_instance_id=instance_id,
            generation=generation,
        )
    return name, metadata, subs


def _member_user_data(name: str, owned, generation: int, spec: dict, where: str) -> bytes | None:
    """What the member side of ``name`` sends after owning ``owned`` in ``generation``."""
    member_side = get_assignor(name)
    if owned or generation >= 0:
        assignment_data = None
        if name == "stream-join-sticky":
            assignment_data = encode_assignment_user_data(
                _int(f"{where}.epoch", spec.get("epoch", generation))
            )
        member_side.on_assignment(Assignment(owned, assignment_data), generation)
    return member_side.subscription_user_data(None, generation)


def _ranges(nums: list[int]) -> str:
    out = []
    start: int | None = None
    prev = -1
    for n in nums:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def format_partitions(parts: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(parts):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{_ranges(ps)}]" for t, ps in by_topic.items()) or "-"


class _Object(dict):
    """A JSON object as parsed, with the keys it gave more than once (json keeps the last)."""

    twice: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = []
        for k, _ in pairs:
            if k in seen:
                twice.append(k)
            seen.add(k)
        out.twice = tuple(twice)
    return out


def _first_duplicate(value: Any, path: str = "") -> str | None:
    """The dotted path of the first key given twice in one object of ``value``, or None."""
    if isinstance(value, _Object):
        if value.twice:
            return f"{path}.{value.twice[0]}" if path else value.twice[0]
        for k, v in value.items():
            found = _first_duplicate(v, f"{path}.{k}" if path else k)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_duplicate(v, f"{path}[{i}]")
            if found:
                return found
    return None


def read_input(path: str) -> Any:
    """The parsed JSON document of ``path`` (``-``: stdin); raises ``InputError`` in one line."""
    source = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            buffer = getattr(sys.stdin, "buffer", None)  # (a test's StringIO has text only)
            data = buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8")
        else:
            with open(path, "rb") as f:
                data = f.read()
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{source}: not a text file (byte {e.start}: not UTF-8); expected the JSON "
            "description of a group"
        ) from None
    try:
        doc = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{source}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply to be a group description") from None
    twice = _first_duplicate(doc)
    if twice:
        raise InputError(f"{twice}: given twice (a JSON object names each key once)")
    return doc


def run(args) -> int:
    if getattr(args, "server", False):
        from . import assign_server

        return assign_server.run(args, read_input, build_group, format_partitions, InputError)
    try:
        doc = read_input(args.input)
        name, metadata, subs = build_group(doc, args.assignor)
        assignor = get_assignor(name)
        result = assignor.assign(metadata, subs)
        kafka_ms = client_kafka_ms(name, metadata, subs, assignor.last_work)
    except OSError as e:
        print(f"rebalance-sim assign: {args.input}: {e.strerror or e}", file=sys.stderr)
        return 2
    except (InputError, AssignorError) as e:
        print(f"rebalance-sim assign: {e}", file=sys.stderr)
        return 2
    q = assignment_quality(metadata, subs, result)
    if args.json:
        json.dump(
            {
                "assignor": name,
                "assignment": {m: [str(tp) for tp in a.partitions] for m, a in result.items()},
                "user_data_hex": {m: a.user_data.hex() for m, a in result.items() if a.user_data},
                "quality": attrs.asdict(q),
                "kafka_ms": round(kafka_ms, 3),
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    width = max(len(m) for m in result)
    print(f"assignor: {name}")
    print(f"{'member':<{width}}  count  partitions")
    for m in sorted(result):
        a = result[m]
        print(f"{m:<{width}}  {len(a.partitions):>5}  {format_partitions(a.partitions)}")
    print(
        f"\npartitions {q.partitions}, assigned {q.assigned}, withheld {q.withheld}; "
        f"per member min {q.min_count}, max {q.max_count}, spread {q.spread}; "
        f"previously owned kept {q.kept}, moved {q.moved}"
    )
    print(f"Kafka's own {name} would take {kafka_ms:,.1f} ms on this input (warm JVM)")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "assign",
        help="run an assignor on a JSON group description and show the assignment and its quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", help="JSON file describing the group, or - for stdin")
    p.add_argument("--assignor", help="assignor name (overrides the input's 'assignor')")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--server",
        action="store_true",
        help="run a server-side assignor of the consumer protocol (KIP-848: uniform, range) "
        "as the group coordinator does; 'owned' is each member's current target; prints the "
        "time Kafka's own assignor takes on the input (kafka_ms)",
    )
    p.set_defaults(func=run)
