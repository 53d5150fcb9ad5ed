"""The directions of a link fault between a member and the coordinator: what a scenario's network
actions name (``direction``) and what the network applies (``sim.world.network.LinkFault``)."""

from __future__ import annotations

TO_COORDINATOR = "to_coordinator"
FROM_COORDINATOR = "from_coordinator"
BOTH = "both"
DIRECTIONS = (TO_COORDINATOR, FROM_COORDINATOR, BOTH)
