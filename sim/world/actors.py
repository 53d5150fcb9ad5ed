"""The thin actors: they deliver inputs to the sans-I/O cores and carry out the effects.

Under the task kernel (``--kernel tasks``, ``sim.kernel.tasks.TaskKernel``) each actor below is a trio
task of its own, handed its inputs through trio by the kernel; under the inline kernel (the
default, ``sim.kernel.queue.Kernel``) the kernel's one task calls the same ``deliver`` with the same
inputs in the same order. ``deliver`` never awaits, so an actor is the same code either way.

- ``CoordinatorActor`` drives the group (``sim.world.group_types.new_group``: a
  ``sim.coordinator.migration.MigratingCoordinator``, which holds a classic group or a consumer group and
  converts between them).
- ``MemberActor`` drives one client's core, a ``sim.client.base.ConsumerClient`` (``sim.client.classic.Member``
  or ``sim.client.consumer.ConsumerMember``). It is handed a core factory
  (``sim.world.group_types.core_factory``) and builds a new core at each process start, so a restart
  loses all in-memory state, as a real restart does; it holds inputs back while the process is
  paused.
- ``Director`` plays the scenario's timeline. What it asks of the world (start a client, the
  members alive, the group's leader for ``crash_leader``, a watch for a phase) is the narrow
  ``WorldControl`` that the runner (``sim.world.runner``) provides.

The actors know nothing of the protocols: they call the cores' common entry points
(``ConsumerClient.start`` / ``handle`` / ``on_timer`` / ...; the coordinators' ``handle`` /
``on_timer`` / ``on_control``) and carry out the effects they return (``sim.kernel.queue.Actor.apply``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from sim.client.base import ConsumerClient
from sim.config import ConsumerConfig
from sim.coordinator.migration import MigratingCoordinator
from sim.kernel.queue import Actor, Kernel
from sim.kernel.rng import LazyGenerator
from sim.scenario.actions import (
    AddMembers,
    AddPartitions,
    Crash,
    CrashLeader,
    CreateTopic,
    DelaySpike,
    DeleteTopic,
    NetworkPartition,
    PacketLoss,
    Pause,
    RemoveMembers,
    RollingRestart,
    action_to_dict,
    resolved_name,
)
from sim.wire import messages as m

# What a MemberActor is handed (``sim.world.group_types.core_factory``): it builds the core for one start
# of its client. (Named here, not imported: sim.world.group_types and sim.run import this module.)
CoreFactory = Callable[["MemberActor", ConsumerConfig, tuple[str, ...]], ConsumerClient]


class WorldControl(Protocol):
    """What the director may ask of the world it plays a timeline in (the runner provides it)."""

    def start_member(
        self, director: Director, name: str, extra: dict, spread: bool = False
    ) -> None: ...

    def member_names(self, alive_only: bool = False) -> list[str]: ...

    def next_member_name(self) -> str: ...

    def leader(self) -> tuple[str, str] | None:
        """The group's leader now, (member id, client), if it has one."""
        ...

    def watch(self, action: CrashLeader) -> None:
        """Crash the leader once the group reaches ``action.phase`` (``Director.crash_leader_at``),
        or drop the watch when the group settles without reaching it (``Director.drop_watch``)."""
        ...


class CoordinatorActor(Actor):
    def __init__(self, kernel: Kernel, core: MigratingCoordinator):
        super().__init__(kernel, m.COORDINATOR)
        self.core = core

    def deliver(self, now: float, kind: str, sender: str, payload: Any) -> None:
        self.core.input_rank = self.input_rank
        if kind == "msg":
            effects = self.core.handle(now, sender, payload)
        elif kind == "timer":
            effects = self.core.on_timer(now, payload[0], payload[1])
        else:
            effects = self.core.on_control(now, sender, payload)
        self.apply(now, effects)


class MemberActor(Actor):
    """One client process. Lifecycle notes: ("start", config, topics), ("crash",), ("close",),
    ("pause",), ("resume",)."""

    def __init__(self, kernel: Kernel, name: str, new_core: CoreFactory):
        super().__init__(kernel, name)
        self.new_core = new_core
        self.core: ConsumerClient | None = None
        self.starting = False  # a start is on its way (set by the runner, read by its settled scan)
        self.held: list[tuple] = []
        self.poll_rng: LazyGenerator | None = (
            None  # the client's poll-loop stream (sim.client.base), made on first start
        )
        self.id_rng: LazyGenerator | None = (
            None  # its consumer-protocol member ids' stream, made on first start
        )

    def deliver(self, now: float, kind: str, sender: str, payload: Any) -> None:
        core = self.core
        if core is not None:
            core.input_rank = self.input_rank  # ties at one instant are ordered by sender rank
        if kind == "control" and isinstance(payload, tuple):
            op = payload[0]
            if op == "start":
                if core is not None and core.alive:
                    self.apply(now, core.crash(now))
                self.held.clear()
                self.starting = False
                self.core = self.new_core(self, payload[1], payload[2])
                self.apply(now, self.core.start(now))
            elif core is None:
                return
            elif op == "crash":
                self.held.clear()
                self.apply(now, core.crash(now))
            elif op == "close":
                if core.paused_at is not None:
                    self.held.append((kind, sender, payload))
                else:
                    self.apply(now, core.close(now))
            elif op == "pause":
                self.apply(now, core.pause(now))
            elif op == "resume":
                self.apply(now, core.resume(now))
                held, self.held = self.held, []
                for k, s, p in held:
                    self.deliver(now, k, s, p)
            return
        if core is None:
            return
        if core.paused_at is not None:
            self.held.append((kind, sender, payload))
            return
        if kind == "msg":
            effects = core.handle(now, payload)
        elif kind == "timer":
            if core.timers.get(payload[0]) != payload[1]:
                return  # superseded or cancelled (Member.on_timer would return no effects)
            effects = core.on_timer(now, payload[0], payload[1])
        else:
            effects = core.on_control(now, payload)
        self.apply(now, effects)


class Director(Actor):
    """Plays the timeline: each action is a timer of its own; rolling restarts and pauses
    schedule their later steps as further timers."""

    def __init__(self, kernel: Kernel, world: WorldControl, timeline: tuple):
        super().__init__(kernel, "director")
        self.world = world
        self.timeline = timeline
        self.pending = 0
        for i, action in enumerate(timeline):
            self._later(action.at_s, ("action", i))

    def crash_leader_at(self, at: float, phase: str) -> None:
        """A watched phase was reached: crash the leader at ``at``."""
        self.pending -= 1
        self._later(at, ("crash_leader", phase))

    def drop_watch(self, now: float, phase: str) -> None:
        self.pending -= 1
        self.kernel.sink.record(
            now,
            self.rank,
            self.next_seq(),
            (
                "event",
                "watch_dropped",
                None,
                None,
                f"crash_leader phase={phase}: the group settled without reaching it",
            ),
        )

    def _later(self, at: float, what: tuple) -> None:
        self.pending += 1
        self.kernel.push(at, self, self.name, "timer", what)

    def _note(self, member: str, note) -> None:
        self.kernel.push(self.kernel.now, self, member, "control", note)
        self.kernel.dirty = True

    def _trigger(self, now: float, member: str | None, detail: str) -> None:
        self.kernel.sink.record(
            now, self.rank, self.next_seq(), ("event", "trigger", member, None, detail)
        )
        self.kernel.dirty = True

    def deliver(self, now: float, kind: str, sender: str, payload: Any) -> None:
        self.pending -= 1
        what = payload[0]
        w = self.world
        if what == "action":
            self._run_action(now, payload[1], self.timeline[payload[1]])
        elif what == "resume":
            self._note(payload[1], ("resume",))
        elif what == "stop":
            name, graceful = payload[1], payload[2]
            self._trigger(now, name, f"rolling_restart stop {'graceful' if graceful else 'crash'}")
            self._note(name, ("close",) if graceful else ("crash",))
        elif what == "start":
            name, extra = payload[1], payload[2]
            self._trigger(now, name, "rolling_restart start")
            w.start_member(self, name, extra)
        elif what == "crash_leader":
            leader = w.leader()
            if leader is None:
                self._trigger(now, None, f"crash_leader phase={payload[1]}: no leader")
            else:
                member_id, client = leader
                self._trigger(now, client, f"crash_leader phase={payload[1]} member_id={member_id}")
                self._note(client, ("crash",))
        elif what == "link_fault":
            for name in w.member_names(alive_only=True) if payload[1] is None else [payload[1]]:
                self._note(name, "link_fault")

    def leader_client(self) -> str | None:
        """The client (member name) of the group's leader now, if there is one."""
        leader = self.world.leader()
        return None if leader is None else leader[1]

    def _run_action(self, now: float, index: int, a) -> None:
        w = self.world
        desc = " ".join(
            f"{k}={v}"
            for k, v in action_to_dict(a).items()
            if k != "at_s" and v not in (None, {}, [])
        )
        if isinstance(a, Crash | Pause) and a.member == "leader":
            client = self.leader_client()
            if client is None:
                self._trigger(now, None, f"{desc}: no leader")
                return
            desc = f"{desc} ({client})"
            a = attrs.evolve(a, member=client)
        if isinstance(a, AddMembers):
            for _ in range(a.count):
                name = w.next_member_name()
                self._trigger(now, name, desc)
                w.start_member(self, name, a.overrides, spread=True)
        elif isinstance(a, RemoveMembers):
            alive = w.member_names(alive_only=True)
            names = (
                [resolved_name(n) for n in a.members]
                if a.members is not None
                else (alive[-a.count :] if a.count else [])
            )
            for name in names:
                self._trigger(now, name, desc)
                self._note(name, ("close",))
        elif isinstance(a, Crash):
            self._trigger(now, resolved_name(a.member), desc)
            self._note(resolved_name(a.member), ("crash",))
        elif isinstance(a, CrashLeader):
            self.pending += 1  # until the watch fires or is dropped (WorldControl.watch)
            w.watch(a)
        elif isinstance(a, Pause):
            self._trigger(now, resolved_name(a.member), desc)
            self._note(resolved_name(a.member), ("pause",))
            self._later(now + a.duration_s, ("resume", a.member))
        elif isinstance(a, RollingRestart):
            names = (
                [resolved_name(n) for n in a.members]
                if a.members is not None
                else w.member_names(alive_only=True)
            )
            extra: dict[str, Any] = {}
            if a.assignors is not None:
                extra["partition_assignment_strategy"] = list(a.assignors)
            if a.static is not None:
                extra["static"] = a.static
            if a.group_protocol is not None:
                extra["group_protocol"] = a.group_protocol
            self._trigger(now, None, desc)
            for i, batch in enumerate(a.batches(names)):
                t_stop = now + i * (a.down_s + a.gap_s)
                for name in batch:
                    self._later(t_stop, ("stop", name, a.graceful))
                    self._later(t_stop + a.down_s, ("start", name, extra))
        elif isinstance(a, AddPartitions | CreateTopic | DeleteTopic):
            self._trigger(now, None, desc)
            for name in w.member_names(alive_only=True):
                self._note(name, "metadata_changed")
        elif isinstance(a, NetworkPartition | DelaySpike | PacketLoss):
            self._trigger(now, None if a.member is None else resolved_name(a.member), desc)
            self._later(now, ("link_fault", a.member))
            self._later(now + a.duration_s, ("link_fault", a.member))
