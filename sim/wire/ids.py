"""Member ids and client ids in Kafka's forms, drawn from a run's seeded random streams.

Kafka's ids are random, and the range assignors (client ``RangeAssignor`` and the server's
``range``) order members by member id, so which member gets which partitions, and where a
restarted member sorts, depends on the ids a run draws. The simulator draws them from seeded
streams, so a seed samples them and the same seed gives the same ids.

- Classic protocol: the coordinator makes the id when a member joins without one
  (``ClassicGroup.generateMemberId``): ``group.instance.id + "-" + UUID`` for a static member,
  ``client.id + "-" + UUID`` otherwise, with a ``java.util.UUID`` (version 4, 36 characters).
- Consumer protocol (KIP-848, KIP-1082): the client makes its own member id once per consumer
  instance, a Kafka ``Uuid`` (``Uuid.randomUuid().toString()``: 16 random bytes with the version-4
  bits, URL-safe base64 without padding, 22 characters, never starting with ``-``).
- ``client.id``: when unset, the Java consumer names itself ``consumer-<group.id>-<instance id>``
  for a static member, ``consumer-<group.id>-<n>`` otherwise, ``n`` counting consumers in one JVM
  (``ConsumerConfig.maybeOverrideClientId``): 1 for a process that runs one consumer.
"""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sim.kernel.rng import LazyGenerator

GROUP_ID = "group"  # the simulated group's group.id (one group per run)


def _uuid4_bytes(rng: np.random.Generator | LazyGenerator) -> bytes:
    """16 random bytes with the version-4 and IETF variant bits, as ``java.util.UUID.randomUUID``."""
    b = bytearray(rng.bytes(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return bytes(b)


def java_uuid(rng: np.random.Generator) -> str:
    """``java.util.UUID.randomUUID().toString()``: 8-4-4-4-12 lower-case hex."""
    return str(uuid.UUID(bytes=_uuid4_bytes(rng)))


def kafka_uuid(rng: np.random.Generator | LazyGenerator) -> str:
    """``org.apache.kafka.common.Uuid.randomUuid().toString()``: 22 URL-safe base64 characters;
    redrawn while it starts with ``-`` (Kafka does, so that it cannot be read as a command-line
    flag). The reserved values 0 and 1 cannot occur: the version bits are set."""
    while True:
        s = base64.urlsafe_b64encode(_uuid4_bytes(rng)).rstrip(b"=").decode("ascii")
        if not s.startswith("-"):
            return s


def default_client_id(instance_id: str | None, group_id: str = GROUP_ID) -> str:
    """The Java consumer's ``client.id`` when none is configured, for a process running one
    consumer (``ConsumerConfig.maybeOverrideClientId``)."""
    return f"consumer-{group_id}-{instance_id if instance_id is not None else 1}"


def classic_member_id(client_id: str, instance_id: str | None, rng: np.random.Generator) -> str:
    """The id a classic coordinator gives a joining member (``ClassicGroup.generateMemberId``)."""
    return f"{instance_id if instance_id is not None else client_id}-{java_uuid(rng)}"
