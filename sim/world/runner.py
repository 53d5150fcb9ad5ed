"""The runner: one scenario's world built on a kernel (network, group, members, director) and
watched while it runs: the member registry, when the group is settled (the end of an episode),
``crash_leader`` watches, progress on stderr, and the run's resource bounds.
"""

from __future__ import annotations

import bisect
import sys
import time

import trio
import trio.testing

from sim.client.handoffs import Handoffs
from sim.config import ConfigError
from sim.coordinator.migration import GroupCore
from sim.kernel.stop import StopToken
from sim.kernel.tasks import DEFAULT_KERNEL, KERNELS
from sim.observe.recorder import EventStream, Recorder
from sim.scenario.actions import CrashLeader
from sim.scenario.scenario import Scenario, member_names
from sim.wire import messages as m
from sim.world.actors import CoordinatorActor, Director, MemberActor
from sim.world.group_types import (
    COORDINATOR_RANK,
    PROTOCOLS,
    GroupProtocol,
    RunWiring,
    core_factory,
    new_group,
)
from sim.world.network import Network

TAIL_S = 1.0


# The director's stream of start instants (sim.kernel.queue.Kernel.rng_for), beside its own; the
# clients' streams are in sim.world.group_types.
START_STREAM = 4


class MetadataHistory:
    """Topic partition counts over simulated time, known before the run from the timeline."""

    def __init__(self, scenario: Scenario, timeline: tuple):
        current = scenario.config.partitions_per_topic()
        self.times = [0.0]
        self.states = [dict(current)]
        self.created = {(t, p): 0.0 for t, n in current.items() for p in range(n)}
        self.deleted: dict[tuple[str, int], float] = {}
        self.rates = {t.name: t.rate for t in scenario.config.topics}
        for a in timeline:
            if a.change_metadata(current, self.created, self.deleted, self.rates):
                self.times.append(a.at_s)
                self.states.append(dict(current))

    def at(self, t: float) -> tuple[int, dict[str, int]]:
        i = bisect.bisect_right(self.times, t) - 1
        return i, self.states[i]


class WorldSink:
    """The kernel's ``EffectSink`` in a run: "send" effects go to the network, the recorded ones
    (events, intervals, violations) to the recorder. Their methods are taken as they are, so an
    effect costs the kernel no call more than it would calling them itself."""

    def __init__(self, network: Network, recorder: Recorder):
        self.send = network.send
        self.record = recorder.record


class Runner:
    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        progress: bool,
        stop: StopToken | None = None,
        kernel: str = DEFAULT_KERNEL,
        keep_kinds: frozenset[str] | None = None,
        stream: EventStream | None = None,
    ):
        self.scenario = scenario
        self.config = scenario.config
        self.seed = seed
        self.progress = progress
        self.recorder = Recorder(keep_kinds, stream)  # None: every event kind
        self.timeline = scenario.timeline_for_seed(seed)  # each action at its instant for this seed
        self.world = MetadataHistory(scenario, self.timeline)
        self.stop = StopToken() if stop is None else stop
        self.kernel = KERNELS[kernel](seed, self.config.max_duration_s, self.stop)
        faults = [f for a in self.timeline if (f := a.link_fault()) is not None]
        self.network = Network(self.kernel, self.config.network, faults)
        self.kernel.sink = WorldSink(self.network, self.recorder)
        self.elide = self.config.elide_heartbeats and not self.network.lossy()
        created = self.world.created
        self.handoffs = Handoffs(lambda tp: created.get((tp.topic, tp.partition), 0.0))
        kernel_ = self.kernel
        self.wiring = RunWiring(
            kernel_,
            self.network,
            self.config,
            lambda: self.world.at(kernel_.now),
            self.world.rates,
            self.handoffs,
            self.elide,
        )
        # The group: it starts as the type of the base consumer config's group.protocol, and
        # members of the other protocol convert it (online migration, sim.coordinator.migration); its
        # protocol record (settled check, phases) is the current type's (``protocol``).
        self.host = new_group(self.wiring)
        self.kernel.dirty_on_io = any(
            PROTOCOLS[name].dirty_on_io for name in PROTOCOLS if scenario.uses_protocol(name)
        )
        if CoordinatorActor(self.kernel, self.host).rank != COORDINATOR_RANK:
            raise AssertionError("the coordinator must be the first actor")
        self.new_core = core_factory(self.wiring)
        initial, self.width = member_names(self.config, scenario.timeline)
        self.members: dict[str, MemberActor] = {}
        self.subscribed_topics: set[str] = set()
        self.watches: list[CrashLeader] = []  # CrashLeader actions waiting for their phase
        self.director = Director(self.kernel, self, self.timeline)
        # each member's start instant within the deployment's spread (SimConfig.start_spread_s)
        self._start_rng = self.kernel.rng_for(self.director.rank, stream=START_STREAM)
        # (coordinator signature, owned count per member, partitions, subscribed topics) of the
        # last full scan that found the group settled, kept up to date by _settled_since with the
        # members that had inputs since (_touched)
        self._quick: tuple | None = None
        self._owned_total = 0
        self._touched: set[str] = set()
        # compare every incremental settled answer with a full scan (tests and the soak)
        self.check_settled = False
        for name in initial:
            self.start_member(self.director, name, {}, spread=True)
        self.kernel.after_batch = self._after_batch
        self.partial_reason = ""
        self.settled = False
        self._probe: MemberActor | None = None
        self._dead_probe: tuple[MemberActor, str] | None = None
        self._last_progress = time.monotonic()
        self._tty = progress and sys.stderr.isatty()
        self._progress_every_s = 1.0 if self._tty else 15.0
        self._timeline_end_s = scenario.needed_duration_s()

    @property
    def coordinator(self) -> GroupCore:
        """The group now: a classic or a consumer group (``sim.coordinator.migration``)."""
        return self.host.group

    @property
    def protocol(self) -> GroupProtocol:
        """The protocol record of the group's type now."""
        return PROTOCOLS[self.host.group_type]

    def _signature(self) -> tuple | None:
        """What a settled group's quick re-check compares: the core itself (a conversion makes a
        new one) and the protocol's signature of it."""
        c = self.coordinator
        sig = self.protocol.signature(c)
        return None if sig is None else (c, sig)

    # ---- used by the director and actors

    def leader(self) -> tuple[str, str] | None:
        """The group's leader now, (member id, client), if it has one (``WorldControl``)."""
        c = self.coordinator
        if c.leader is None:
            return None
        meta = c.members.get(c.leader)
        return None if meta is None else (c.leader, meta.client)

    def watch(self, action: CrashLeader) -> None:
        """Crash the leader when the group reaches ``action.phase`` (``WorldControl``)."""
        self.watches.append(action)

    def next_member_name(self) -> str:
        return f"c{len(self.members):0{self.width}d}"

    def member_names(self, alive_only: bool = False) -> list[str]:
        return sorted(
            n
            for n, a in self.members.items()
            if not alive_only or (a.core is not None and a.core.alive)
        )

    def start_member(
        self, director: Director, name: str, extra: dict, spread: bool = False
    ) -> None:
        """Start (or restart) client ``name`` now, or with ``spread`` at an instant drawn from
        ``[now, now + start_spread_s)``."""
        if name not in self.members:
            self.members[name] = MemberActor(self.kernel, name, self.new_core)
        self.members[name].starting = True
        if self._quick is not None:
            self._touched.add(name)
        try:
            cfg = self.config.consumer_for(name, extra)
        except ConfigError as e:
            raise e.under(f"member {name}") from None
        topics = cfg.topics or tuple(t.name for t in self.config.topics)
        self.subscribed_topics.update(topics)
        at = self.kernel.now
        if spread and self.config.start_spread_s:
            at += float(self._start_rng.random()) * self.config.start_spread_s
        self.kernel.push(at, director, name, "control", ("start", cfg, topics))
        self.kernel.dirty = True

    # ---- settling (the end of an episode)

    def _is_settled(self, t: float) -> bool:
        if self._quick is not None:
            known = self._settled_since(t)
            if known is not None:
                if self.check_settled:
                    self._check_against_scan(t, known)
                return known
        self._quick = None
        return self._scan_settled(t)

    def _settled_since(self, t: float) -> bool | None:
        """Settled or not, judged from the last full scan that found the group settled and the
        members that had inputs since (``_touched``); None when only a full scan can tell.

        Inputs change only the actors they are delivered to, so while the coordinator's state and
        generation stay what they were (the protocol's ``signature``, which leaves membership
        out), a member that had no input since it was last found settled and in the group still
        is, with the same partitions. Membership changes with that signature unchanged (a static
        member coming back from a restart takes its old membership over, KIP-345) come from
        members that had inputs (the one that joined, the one that left), so checking those and
        counting the rest against the coordinator's members gives the full scan's answer. A
        crash, a close or a pause is an input to the member; a coordinator never removes a
        member that has no inputs (a quiet member has no session timer; one whose heartbeats
        stop has heartbeat timers). ``check_settled`` compares each answer with a full scan."""
        assert self._quick is not None
        sig, counts, total, topics = self._quick
        if self._signature() != sig:
            return None
        c = self.coordinator
        members = self.members
        touched = self._touched
        if touched:
            in_group = self.protocol.in_group
            for name in list(touched):
                a = members[name]
                core = a.core
                if a.starting:
                    return False
                if core is None or not core.alive:
                    if core is not None and core.member_id in c.members:
                        return False  # the coordinator still counts it
                    prev = counts.pop(name, None)  # gone: the full scan skips it too
                    if prev is not None:
                        self._owned_total -= prev
                    touched.discard(name)
                    continue
                if not core.settled or not in_group(c, core):
                    return False
                if not topics.issuperset(core.topics):
                    return None  # a subscription the partition total does not cover
                n = len(core.owned)
                self._owned_total += n - counts.get(name, 0)
                counts[name] = n
                touched.discard(name)
        if not counts or not self.protocol.group_stable(c, t):
            return None if not counts else False
        return len(counts) == len(c.members) and self._owned_total == total

    def _check_against_scan(self, t: float, known: bool) -> None:
        """``check_settled``: the incremental answer must be the full scan's."""
        quick, probe, dead = self._quick, self._probe, self._dead_probe
        full = self._scan_settled(t)
        self._quick, self._probe, self._dead_probe = quick, probe, dead
        if full != known:
            self.recorder.violation(
                t, f"the incremental settled check said {known}, a full scan {full}"
            )

    def _touch(self, names) -> None:
        """Members that had inputs since the last settled scan (see ``_settled_since``)."""
        members = self.members
        for name in names:
            if name in members:
                self._touched.add(name)
            elif name != m.COORDINATOR and name != "director":
                self._quick = None  # an actor the incremental check does not follow

    def _scan_settled(self, t: float) -> bool:
        """The full check: the coordinator has nothing in progress, every member it counts is a
        live client, settled and current in the group, and every subscribed partition is owned
        (what each of these means is the protocol's: ``sim.world.group_types.GroupProtocol``)."""
        c = self.coordinator
        p = self.protocol
        if p.group_empty(c) and not any(
            a.starting or (a.core is not None and a.core.alive) for a in self.members.values()
        ):
            return True  # nobody left: nothing can be owned
        if not p.group_stable(c, t):
            return False
        probe = self._probe
        if probe is not None and (
            probe.starting
            or (probe.core is not None and probe.core.alive and not probe.core.settled)
        ):
            return False
        # A member the coordinator still counts whose client is gone (crashed, paused, closed):
        # unsettled until the coordinator removes it, with no need to rescan every member.
        dead = self._dead_probe
        if dead is not None:
            actor, member_id = dead
            core = actor.core
            if member_id in c.members and (
                core is None or not core.alive or core.member_id != member_id
            ):
                return False
            self._dead_probe = None
        in_group = p.in_group
        alive = []
        for a in self.members.values():
            core = a.core
            if a.starting:
                self._probe = a
                return False
            if core is None or not core.alive:
                if core is not None and core.member_id in c.members:
                    self._dead_probe = (a, core.member_id)
                continue
            if not core.settled or not in_group(c, core):
                self._probe = a
                return False
            alive.append(core)
        if len(alive) != len(c.members):
            return False
        _, meta = self.world.at(t)
        topics: set[str] = set()
        for core in alive:
            topics.update(core.topics)
        total = sum(meta.get(tp, 0) for tp in topics)
        if len(self.world.times) == 1:
            # Metadata never changes in this run: every owned partition exists.
            counts = {core.name: len(core.owned) for core in alive}
            owned_total = sum(counts.values())
            sig = self._signature()
            if owned_total == total and sig is not None:
                self._quick = (sig, counts, total, frozenset(topics))
                self._owned_total = owned_total
                self._touched = set()
            return owned_total == total
        owned = 0
        for core in alive:
            for tp in core.owned:
                if tp.partition < meta.get(tp.topic, 0):
                    owned += 1
        return owned == total

    def _after_batch(self, t: float) -> bool:
        k = self.kernel
        if self.watches:
            phase = self.protocol.phases.get(self.coordinator.state)
            for w in [w for w in self.watches if w.phase == phase]:
                self.watches.remove(w)
                self.director.crash_leader_at(t + w.delay_s, w.phase)
        if self.progress and time.monotonic() - self._last_progress > self._progress_every_s:
            self._last_progress = time.monotonic()
            # how far along the timeline the run is: a rolling bounce of a large group one member
            # at a time covers days of simulated time, at a steady pace
            end = self._timeline_end_s
            along = f" of ~{end:,.0f}s" if t < end else ""
            line = (
                f"  simulated {t:9.2f}s{along}  messages {self.network.sent:>9,}  members "
                f"{len(self.coordinator.members):>6,}  state {self.coordinator.state:<20}"
            )
            if self._tty:
                print("\r" + line, end="", file=sys.stderr, flush=True)
            else:  # a log file or a pipe: a plain line now and then, no carriage returns
                print(line.rstrip(), file=sys.stderr, flush=True)
        done = False
        if self._quick is not None:
            self._touch(k.batch_dests)
        if k.dirty:
            k.dirty = False
            if self.protocol.rebalancing(self.coordinator):
                self._quick = None  # what _is_settled concludes at once mid-rebalance
                settled = False
            else:
                settled = self._is_settled(t)
            if settled != self.settled:
                self.settled = settled
                self.recorder.event(
                    t,
                    self.director.rank,
                    self.director.next_seq(),
                    "settled" if settled else "unsettled",
                    None,
                    self.coordinator.generation,
                    "",
                )
            if settled and self.watches and self.director.pending == len(self.watches):
                for w in self.watches:
                    self.director.drop_watch(t, w.phase)
                self.watches.clear()
            done = (
                settled
                and self.director.pending == 0
                and not ((nt := k.next_time()) is not None and nt <= t)
            )
            if settled and not done and not k.dirty_on_io and self.director.pending == 0:
                # inputs of this instant are still queued: look again after them (with dirty_on_io
                # off nothing else may make the run look again)
                k.dirty = True
        # (the resource bounds are the stop token's, checked by the kernel after this returns)
        return done

    # ---- the run

    def run(self) -> tuple[float, bool]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        trio.run(self.kernel.run, clock=clock)
        # stopped by the run's stop token: a limit (max_events, max_wall_s) or a request from
        # outside the run (the CLI's Ctrl-C, --max-wall)
        if self.kernel.stopped:
            self.partial_reason = f"{self.kernel.stopped} at simulated t={self.kernel.now:.3f}s"
        if self._tty:
            print(file=sys.stderr)
        # observed for one more second after the last input, so final ownership shows as intervals
        # (a partial run ends where it stopped: nothing after that was simulated)
        end = self.kernel.now + (0.0 if self.partial_reason else TAIL_S)
        return end, self.settled and self.director.pending == 0

    def partitions_alive(self, end: float) -> dict[tuple[str, int], tuple[float, float]]:
        out = {}
        subscribed, deleted = self.subscribed_topics, self.world.deleted
        for tp, created in self.world.created.items():
            if tp[0] not in subscribed:
                continue
            stop = deleted.get(tp, end)
            if stop > end:
                stop = end
            if stop > created:
                out[tp] = (created, stop)
        return out


def release_world(runner: Runner) -> None:
    """Cut the finished world's reference cycles (actors and kernel, the kernel's queue, cores'
    callbacks, trio's finished task still holding the kernel), so reference counting frees it
    as soon as the run returns. Left to the cyclic collector, a 1,000-member world is about
    100,000 objects to trace, and Spark's Python workers run a full collection after every task
    (pyspark's daemon). Only the results outlive this."""
    kernel = runner.kernel
    actors = kernel.actors()
    kernel.clear()
    world = [
        runner,
        kernel,
        runner.recorder,
        runner.network,
        runner.coordinator,
        runner.host,
        runner.world,
        *actors,
    ]
    world += [core for a in actors if (core := getattr(a, "core", None)) is not None]
    for obj in world:
        d = getattr(obj, "__dict__", None)
        if d is not None:
            d.clear()
        # a compiled object (sim.compiled) keeps its attributes out of any dict: each one that
        # may be None is dropped (the kernel's own containers were emptied above)
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__mypyc_attrs__", ()):
                try:
                    setattr(obj, name, None)
                except (TypeError, AttributeError):
                    pass  # a value that may not be None: an int, a string, a container
