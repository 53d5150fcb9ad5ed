"""The simulated network between members and the coordinator: latency, drops, delay spikes and
one-way partitions.

Latency is drawn from the *sender's* own numpy Generator, so one actor's traffic never shifts
another actor's draws. Fault windows are known before the run (they come from the timeline), so
whether a link is cut at a given instant is a pure function of time.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.config import NetworkConfig
from sim.wire.faults import LinkFault
from sim.wire.messages import COORDINATOR


class Network:
    """Puts messages on the kernel's queue at ``sent_at + latency`` unless dropped."""

    def __init__(self, kernel, config: NetworkConfig, faults: Sequence[LinkFault] = ()):
        self.kernel = kernel
        self.config = config
        self.cuts = [f for f in faults if f.extra_s is None and f.loss is None]
        self.spikes = [f for f in faults if f.extra_s is not None]
        self.losses = [f for f in faults if f.loss is not None]
        self.sent = 0
        self.dropped = 0
        self._faulty = bool(self.cuts or self.losses or config.drop_probability > 0)  # may drop
        self._latency: dict = {}  # member -> its Latency (config.latency_of, looked up once)
        self._constant_s: dict = {}  # member -> its delay in seconds when its Latency is constant

    def lossy(self) -> bool:
        """Whether messages can vanish at random (idle heartbeats then cannot be elided)."""
        return self.config.drop_probability > 0 or bool(self.losses)

    def send(self, sender, dest: str, msg, now: float, sent_at: float | None = None) -> None:
        base = now if sent_at is None else sent_at
        to_coord = dest == COORDINATOR
        member = sender.name if to_coord else dest
        self.sent += 1
        rng = sender.rng
        if self._faulty:
            for f in self.cuts:
                if f.applies(member, to_coord, base):
                    self.dropped += 1
                    return
            if self.config.drop_probability > 0 and rng.random() < self.config.drop_probability:
                self.dropped += 1
                return
            for f in self.losses:
                if f.applies(member, to_coord, base) and rng.random() < f.loss:
                    self.dropped += 1
                    return
        delay = self._constant_s.get(member)
        if delay is None:
            latency = self._latency.get(member)
            if latency is None:
                latency = self._latency[member] = self.config.latency_of(member)
            delay = latency.sample_s(rng)
            if latency.kind == "constant":  # the same value every time: looked up once from now on
                self._constant_s[member] = delay
        for f in self.spikes:
            if f.applies(member, to_coord, base):
                delay += f.extra_s  # type: ignore[operator]  # (spikes have one)
        at = (
            base + delay
        )  # (base + delay, not base + latency + extra: float sums are not associative)
        if at < now:
            at = now
        self.kernel.push(at, sender, dest, "msg", msg)

    def link_fault_active(self, member: str, t: float) -> bool:
        """Whether a cut or a delay spike touches ``member``'s links (either way) at ``t``."""
        return any(f.applies(member, d, t) for f in self.cuts + self.spikes for d in (True, False))

    def sample_latency(self, member: str, rng) -> float:
        return self.config.latency_of(member).sample_s(rng)
