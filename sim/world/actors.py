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

from sim.client.base import ConsumerClient
from sim.config import ConsumerConfig
from sim.coordinator.migration import MigratingCoordinator
from sim.kernel.queue import Actor, Kernel
from sim.kernel.rng import LazyGenerator
from sim.scenario.actions import Action, CrashLeader
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
            if self.core.superseded(payload[0], payload[1]):
                return  # re-armed or cancelled since: the core would return no effects
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
            if kind == "timer" and core.paused_at is None:
                # the commonest input first; a third of them superseded or cancelled since
                if core.timers.get(payload[0]) == payload[1]:
                    self.apply(now, core.on_timer(now, payload[0], payload[1]))
                return
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

    def __init__(self, kernel: Kernel, world: WorldControl, timeline: tuple[Action, ...]):
        super().__init__(kernel, "director")
        self.world = world
        self.timeline = timeline
        self.pending = 0
        for i, action in enumerate(timeline):
            self.later(action.at_s, ("action", i))

    def crash_leader_at(self, at: float, phase: str) -> None:
        """A watched phase was reached: crash the leader at ``at``."""
        self.pending -= 1
        self.later(at, ("crash_leader", phase))

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

    def later(self, at: float, what: tuple) -> None:
        self.pending += 1
        self.kernel.push(at, self, self.name, "timer", what)

    def note(self, member: str, note) -> None:
        self.kernel.push(self.kernel.now, self, member, "control", note)
        self.kernel.dirty = True

    def trigger(self, now: float, member: str | None, detail: str) -> None:
        self.kernel.sink.record(
            now, self.rank, self.next_seq(), ("event", "trigger", member, None, detail)
        )
        self.kernel.dirty = True

    def deliver(self, now: float, kind: str, sender: str, payload: Any) -> None:
        self.pending -= 1
        what = payload[0]
        w = self.world
        if what == "action":
            self.timeline[payload[1]].play(self, now)
        elif what == "resume":
            self.note(payload[1], ("resume",))
        elif what == "stop":
            name, graceful = payload[1], payload[2]
            self.trigger(now, name, f"rolling_restart stop {'graceful' if graceful else 'crash'}")
            self.note(name, ("close",) if graceful else ("crash",))
        elif what == "start":
            name, extra = payload[1], payload[2]
            self.trigger(now, name, "rolling_restart start")
            w.start_member(self, name, extra)
        elif what == "crash_leader":
            leader = w.leader()
            if leader is None:
                self.trigger(now, None, f"crash_leader phase={payload[1]}: no leader")
            else:
                member_id, client = leader
                self.trigger(now, client, f"crash_leader phase={payload[1]} member_id={member_id}")
                self.note(client, ("crash",))
        elif what == "link_fault":
            for name in w.member_names(alive_only=True) if payload[1] is None else [payload[1]]:
                self.note(name, "link_fault")

    # ---- the Stage an action is played on (sim.scenario.actions.Stage)

    def alive_members(self) -> list[str]:
        return self.world.member_names(alive_only=True)

    def next_member_name(self) -> str:
        return self.world.next_member_name()

    def start_member(self, name: str, extra: dict, spread: bool = False) -> None:
        self.world.start_member(self, name, extra, spread)

    def watch(self, action: CrashLeader) -> None:
        self.pending += 1  # until the watch fires or is dropped (WorldControl.watch)
        self.world.watch(action)

    def leader_client(self) -> str | None:
        """The client (member name) of the group's leader now, if there is one."""
        leader = self.world.leader()
        return None if leader is None else leader[1]
