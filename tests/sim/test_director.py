"""The director plays a timeline through the narrow ``WorldControl`` it is handed
(``sim.world.actors``): a world that is no runner (here a stand-in that records what it is asked)
is enough to play it."""

from __future__ import annotations

from sim.kernel.queue import Kernel
from sim.observe.recorder import Recorder
from sim.scenario.actions import AddMembers, Crash, CrashLeader
from sim.world.actors import Director, WorldControl


class _World:
    """A ``WorldControl`` that records what the director asks of it."""

    def __init__(self, leader: tuple[str, str] | None):
        self.started: list[tuple[str, dict, bool]] = []
        self.watched: list[CrashLeader] = []
        self._leader = leader
        self._count = 0

    def start_member(self, director, name: str, extra: dict, spread: bool = False) -> None:
        self.started.append((name, extra, spread))

    def member_names(self, alive_only: bool = False) -> list[str]:
        return ["c0", "c1"]

    def next_member_name(self) -> str:
        self._count += 1
        return f"n{self._count}"

    def leader(self) -> tuple[str, str] | None:
        return self._leader

    def watch(self, action: CrashLeader) -> None:
        self.watched.append(action)


class _Sink:
    """Records what the director records; it sends nothing."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder
        self.record = recorder.record

    def send(self, sender, dest, msg, now, sent_at=None):
        raise AssertionError("the director sends no message")


def _play(world: WorldControl, timeline: tuple) -> tuple[Kernel, Director]:
    kernel = Kernel(0, 1e9)
    kernel.sink = _Sink(Recorder())
    director = Director(kernel, world, timeline)
    for i, action in enumerate(timeline):
        director.deliver(action.at_s, "timer", director.name, ("action", i))
    return kernel, director


def test_the_director_plays_a_timeline_through_world_control():
    """Members added by name from the world, a crash of the leader the world names (its client is
    told to crash), and a crash_leader watch handed to the world."""
    watch = CrashLeader(at_s=3.0, phase="sync")
    world = _World(leader=("member-7", "c1"))
    kernel, director = _play(
        world, (AddMembers(at_s=1.0, count=2), Crash(at_s=2.0, member="leader"), watch)
    )
    assert [(name, spread) for name, _, spread in world.started] == [("n1", True), ("n2", True)]
    assert world.watched == [watch] and director.pending == 1  # the watch, until it fires
    triggers = [row for row in kernel.sink.recorder.events if row[3] == "trigger"]
    assert [(row[4], row[6]) for row in triggers] == [
        ("n1", "action=add_members count=2"),
        ("n2", "action=add_members count=2"),
        ("c1", "action=crash member=leader (c1)"),
    ]
    assert director.leader_client() == "c1"


def test_a_leader_crash_without_a_leader_is_recorded_as_such():
    world = _World(leader=None)
    kernel, director = _play(world, (Crash(at_s=2.0, member="leader"),))
    (trigger,) = [row for row in kernel.sink.recorder.events if row[3] == "trigger"]
    assert trigger[4] is None and trigger[6] == "action=crash member=leader: no leader"
    assert director.leader_client() is None
