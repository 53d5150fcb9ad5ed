"""One consumer client (sim.client.base.ConsumerClient) with a subclass per group protocol, member
states as data, and the protocol records (sim.world.group_types) a run is built from."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from assignors import TopicPartition
from sim.client.base import ConsumerClient
from sim.client.classic import Member
from sim.client.consumer import ConsumerMember
from sim.client.states import IN_GROUP, ClassicMemberState, ConsumerMemberState
from sim.config import GROUP_PROTOCOLS, ConsumerConfig, GroupConfig
from sim.coordinator.classic.group import ClassicGroup
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.consumer.classic_members import ConsumerGroupWithClassicMembers
from sim.errors import IllegalTransition
from sim.scenario.scenario import Scenario
from sim.wire import messages as m
from sim.world.group_types import PROTOCOLS
from sim.world.runner import Runner

ROOT = Path(__file__).resolve().parent.parent.parent


def _class_def(cls: type) -> ast.ClassDef:
    """``cls``'s definition, parsed from its module's source (a compiled class has no source to
    inspect)."""
    tree = ast.parse((ROOT / (cls.__module__.replace(".", "/") + ".py")).read_text())
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__qualname__)


def _methods(cls: type) -> dict[str, ast.FunctionDef]:
    """The methods (and properties) ``cls``'s own body defines."""
    return {n.name: n for n in _class_def(cls).body if isinstance(n, ast.FunctionDef)}


def _self_attributes(cls: type) -> set[str]:
    """The ``self.X`` names ``cls.__init__`` assigns."""
    tree = _methods(cls)["__init__"]
    names = set()
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AnnAssign) else [])
        )
        for t in targets:
            for leaf in ast.walk(t):
                if (
                    isinstance(leaf, ast.Attribute)
                    and isinstance(leaf.value, ast.Name)
                    and leaf.value.id == "self"
                ):
                    names.add(leaf.attr)
    return names


def test_both_members_are_consumer_clients_and_borrow_no_methods():
    assert issubclass(Member, ConsumerClient) and issubclass(ConsumerMember, ConsumerClient)
    classic = vars(Member)
    for name, value in vars(ConsumerMember).items():
        if callable(value) or isinstance(value, property):
            assert value is not classic.get(name), f"ConsumerMember.{name} is Member's"


def test_no_attribute_is_initialised_in_two_inits():
    base = _self_attributes(ConsumerClient)
    classic = _self_attributes(Member)
    consumer = _self_attributes(ConsumerMember)
    assert len(base) > 30 and len(classic) > 10 and len(consumer) > 10
    assert not classic & consumer, sorted(classic & consumer)
    assert not base & classic, sorted(base & classic)
    assert not base & consumer, sorted(base & consumer)


def test_the_hooks_are_declared_on_the_base_and_filled_by_both():
    hooks = {
        name
        for name, fn in _methods(ConsumerClient).items()
        if any(ast.unparse(d) == "abc.abstractmethod" for d in fn.decorator_list)
    }
    assert {
        "generation",
        "start",
        "crash",
        "close",
        "pause",
        "resume",
        "handle",
        "on_timer",
        "on_control",
        "settled",
        "_poll",
        "_send_commit",
        "_commit_refused",
        "_commit_error",
        "_is_fenced",
    } <= hooks
    if hasattr(ConsumerClient, "__abstractmethods__"):  # (the source; compiled classes have no ABC)
        assert set(ConsumerClient.__abstractmethods__) == hooks
        with pytest.raises(TypeError, match="abstract"):
            ConsumerClient(
                "c0",
                ConsumerConfig(),
                ("t",),
                lambda: 0.0,
                False,
                rates=None,
                handoffs=None,
                poll_rng=None,
                rank=0,
            )
    for cls in (Member, ConsumerMember):
        # each hook defined by the protocol's own class (Member's generation: an attribute)
        missing = (
            hooks
            - set(_methods(cls))
            - {
                a.target.id
                for a in _class_def(cls).body
                if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
            }
        )
        assert not missing, f"{cls.__name__} does not fill {sorted(missing)}"


@pytest.mark.parametrize(
    "states,cls",
    [(ClassicMemberState, Member), (ConsumerMemberState, ConsumerMember)],
)
def test_member_states_are_data(states, cls):
    """Every member state lists the states it may be entered from, all of them the same
    protocol's; the value of each is its name (what events record, as Kafka names it); the client
    starts in one of them, and every state it may leave is one it can be in (entered, or the
    initial one)."""
    assert cls.INITIAL_STATE in states
    reachable = {s for s in states if s.valid_previous_states()} | {cls.INITIAL_STATE}
    for state in states:
        assert state.value == state.name
        assert state.valid_previous_states() <= set(states)
        assert state.valid_previous_states() <= reachable


def test_consumer_member_states_follow_kafkas_member_state():
    """MemberState's valid previous states (clients consumer.internals), but for STALE, which the
    simulator enters from the states in the group (it has no separate LEAVING step), and FATAL,
    which it does not enter (a fatal error stops the client)."""
    s = ConsumerMemberState
    assert s.STABLE.valid_previous_states() == {s.JOINING, s.ACKNOWLEDGING, s.RECONCILING}
    assert s.ACKNOWLEDGING.valid_previous_states() == {s.RECONCILING}
    assert s.JOINING.valid_previous_states() == {s.FENCED, s.UNSUBSCRIBED, s.STALE}
    assert s.LEAVING.valid_previous_states() == {s.PREPARE_LEAVING}
    assert s.UNSUBSCRIBED.valid_previous_states() == {s.PREPARE_LEAVING, s.LEAVING, s.FENCED}
    assert s.STALE.valid_previous_states() == {s.LEAVING, *IN_GROUP}
    assert {s.JOINING, s.RECONCILING, s.ACKNOWLEDGING, s.STABLE} == IN_GROUP
    assert not s.FATAL.valid_previous_states()


def test_classic_group_states_follow_kafkas_classic_group_state():
    """ClassicGroupState.validPreviousStates, state by state."""
    g = ClassicGroupState
    assert g.EMPTY.valid_previous_states() == {g.PREPARING_REBALANCE}
    assert g.PREPARING_REBALANCE.valid_previous_states() == {
        g.STABLE,
        g.COMPLETING_REBALANCE,
        g.EMPTY,
    }
    assert g.COMPLETING_REBALANCE.valid_previous_states() == {g.PREPARING_REBALANCE}
    assert g.STABLE.valid_previous_states() == {g.COMPLETING_REBALANCE}
    assert g.DEAD.valid_previous_states() == set(g)
    assert [str(s) for s in g] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


def test_an_illegal_transition_is_refused():
    mb = ConsumerMember("c0", ConsumerConfig(group_protocol="consumer"), ("t",))
    assert mb.state == ConsumerMemberState.UNSUBSCRIBED
    with pytest.raises(IllegalTransition, match="UNSUBSCRIBED to STABLE"):
        mb._transition(ConsumerMemberState.STABLE)
    classic = Member("c0", ConsumerConfig(), ("t",), lambda: (0, {"t": 4}), lambda: 0.0, None)
    with pytest.raises(IllegalTransition, match="UNJOINED to STABLE"):
        classic._transition(ClassicMemberState.STABLE)
    group = ClassicGroup(GroupConfig())
    with pytest.raises(IllegalTransition, match="from Empty to Stable"):
        group._transition(ClassicGroupState.STABLE)


def test_every_state_change_goes_through_the_check():
    """``self.state`` is assigned in ``_transition`` only (and set to the initial state, which is no
    transition, at a start and at a consumer member's crash); a consumer member that joins and
    takes an assignment ends ACKNOWLEDGING, from which it may not go back to JOINING."""
    for cls in (ConsumerClient, Member, ConsumerMember):
        for name, fn in _methods(cls).items():
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if ast.unparse(t) == "self.state":
                            assert name == "_transition" or ast.unparse(node.value) == (
                                "self.INITIAL_STATE"
                            ), f"{cls.__name__}.{name} sets the state without the check"

    mb = ConsumerMember("c0", ConsumerConfig(group_protocol="consumer"), ("t",))
    mb.start(0.0)
    assert mb.state == ConsumerMemberState.JOINING
    resp = m.ConsumerGroupHeartbeatResponse(
        m.NONE, "c0-1", 1, 5.0, frozenset({TopicPartition("t", 0)}), correlation=mb.hb_correlation
    )
    mb.handle(0.01, resp)
    assert mb.state == ConsumerMemberState.ACKNOWLEDGING
    with pytest.raises(IllegalTransition):
        mb._transition(ConsumerMemberState.JOINING)


def test_one_record_per_group_protocol():
    assert set(PROTOCOLS) == set(GROUP_PROTOCOLS)
    for name, p in PROTOCOLS.items():
        assert p.name == name
        assert set(p.phases.values()) == {"join", "sync", "stable"}


@pytest.mark.parametrize(
    "protocol,coordinator,core",
    # (a consumer group's coordinator is the one that can also serve classic members)
    [
        ("classic", ClassicGroup, Member),
        ("consumer", ConsumerGroupWithClassicMembers, ConsumerMember),
    ],
)
def test_a_run_is_built_from_its_protocols_record(protocol, coordinator, core):
    sc = Scenario.from_dict(
        {
            "name": "t",
            "members": 3,
            "max_duration_s": 30,
            "topics": [{"name": "t", "partitions": 6}],
            "consumer": {"group_protocol": protocol},
        }
    )
    runner = Runner(sc, 0, False)
    assert runner.protocol is PROTOCOLS[protocol]
    assert type(runner.coordinator) is coordinator
    runner.run()
    cores = [a.core for a in runner.members.values()]
    assert len(cores) == 3 and all(type(c) is core for c in cores)
    assert runner.settled
