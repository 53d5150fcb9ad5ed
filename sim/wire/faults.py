"""A link fault between a member and the coordinator: its directions (what a scenario's network
actions name, ``direction``) and ``LinkFault``, the window a network action makes (its
``link_fault``) and the network applies (``sim.world.network``)."""

from __future__ import annotations

import attrs

TO_COORDINATOR = "to_coordinator"
FROM_COORDINATOR = "from_coordinator"
BOTH = "both"
DIRECTIONS = (TO_COORDINATOR, FROM_COORDINATOR, BOTH)


@attrs.frozen
class LinkFault:
    """During [start, end): a cut (``extra_s`` None) or an added delay on member<->coordinator
    links of ``member`` (None = every member) in ``direction``."""

    start: float
    end: float
    member: str | None
    direction: str = BOTH
    extra_s: float | None = None
    loss: float | None = None  # a loss window: drop with this probability instead

    def applies(self, member: str, to_coordinator: bool, t: float) -> bool:
        if not (self.start <= t < self.end):
            return False
        if self.member is not None and self.member != member:
            return False
        if self.direction == BOTH:
            return True
        return (self.direction == TO_COORDINATOR) == to_coordinator
