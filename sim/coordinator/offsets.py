"""Committed offsets of a group, as the group coordinator stores them (Kafka's
``OffsetMetadataManager`` / ``GroupMetadata`` offsets cache), in the fluid model's units.

An offset here is a *position in production time*: committing position ``w`` for a partition says
that every record produced into it before ``w`` has been processed. Records are fluid (rate x
time), so a position converts to records with the partition's production rate. Kafka stores
offsets as record numbers; with a constant production rate per partition the two are the same
thing up to that factor. The coordinator never reads this to decide anything about membership:
commits are validated by each protocol's core (generation, member id, member epoch) before they
reach the store.
"""

from __future__ import annotations

from collections.abc import Iterable

from assignors import TopicPartition


class OffsetStore:
    """The group's committed position per partition (absent = no committed offset)."""

    __slots__ = ("_committed",)

    def __init__(self) -> None:
        self._committed: dict[TopicPartition, float] = {}

    def commit(
        self,
        partitions: Iterable[TopicPartition],
        position_s: float,
        ahead: Iterable[tuple[TopicPartition, float]] = (),
    ) -> None:
        """Commit ``position_s`` for ``partitions``, except those listed in ``ahead`` with a
        position of their own (one OffsetCommit carries an offset per partition)."""
        committed = self._committed
        for tp in partitions:
            committed[tp] = position_s
        for tp, pos in ahead:
            committed[tp] = pos

    def fetch(self, partitions: Iterable[TopicPartition]) -> tuple[float | None, ...]:
        get = self._committed.get
        return tuple(get(tp) for tp in partitions)

    def __len__(self) -> int:
        return len(self._committed)
