"""User data that only old clients send, built by the simulator itself.

``sticky_v0_user_data``: Kafka's StickyAssignor user data version 0 (before KIP-341): a Struct
with one field, ``previous_assignment``: ARRAY of { topic: STRING, partitions: ARRAY of INT32 }.
Big-endian; ARRAY counts are INT32, STRING is an INT16 length then UTF-8 bytes. There is no
generation field, so a leader reading it assumes the default generation (-1).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from assignors import TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def sticky_v0_user_data(partitions: Iterable[TopicPartition]) -> bytes:
    """V0 bytes for a previous assignment (topics in first-seen order, partitions as given)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [_I32.pack(len(by_topic))]
    for topic, parts in by_topic.items():
        name = topic.encode("utf-8")
        out.append(_I16.pack(len(name)))
        out.append(name)
        out.append(_I32.pack(len(parts)))
        out.extend(_I32.pack(p) for p in parts)
    return b"".join(out)
