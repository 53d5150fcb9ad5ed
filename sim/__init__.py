"""The simulator: a Kafka consumer group's rebalances as actors in virtual time.

The group coordinator, each client process and the director playing the timeline are actors
(``world.actors``). ``run_scenario(..., kernel="tasks")`` runs each of them as a trio task of its
own, handed its inputs through trio in virtual time (trio's ``MockClock``); the default, "inline",
calls the same actors with the same inputs in the same order from one trio task, and is faster.
Both give the same results (``kernel``).

The protocol logic is in sans-I/O cores (state + input -> effects, no clock, no trio), on the two
sides of the wire as in Kafka: the clients (``client``) and the group coordinator
(``coordinator``), which never import each other. A client core is a ``ConsumerClient``
(``client.base``: poll loop, positions, offsets and commits, callbacks, pauses) of one of two
subclasses, one per group protocol: ``client.classic`` and ``client.consumer`` (KIP-848). Each
client runs the protocol of its own config; the group is one coordinator
(``coordinator.migration``) that holds a classic or a consumer group and converts between them as
members of the other protocol come and go (KIP-848's online migration); the run reads the record
of the group's current type (``world.group_types``): member core, settled check, phases.

Layout (docs/design.md, "Layout", says what each room owns and may import):
  config       SimConfig and its parts (Kafka's names and defaults), ConfigError
  errors       the simulator's exceptions
  run          run_scenario -> RunResult
  compiled     which build runs: the hot modules compiled with mypyc (scripts/build_compiled.py),
               or their source (REBALANCE_SIM_PURE=1, or a stale build)
  kernel/      the deterministic input queue and the two kernels that deliver it (inline, tasks),
               the actors' random streams, the stop request
  wire/        what crosses the network: Kafka's messages, the control notes, ids, fault directions
  coordinator/ the group coordinator: classic/ (the classic group), consumer/ (KIP-848's consumer
               group, its classic members), migration (the group as either type), offsets
  client/      the consumer clients: base, classic, consumer; the cooperative check; hand-offs
  world/       the composition root: network, actors, one record per group.protocol, the runner
  scenario/    Scenario = SimConfig + timeline of actions; the actions; the built-in scenarios
  observe/     events and intervals (recorder), metrics, run-level invariants
  testing/     the deterministic-simulation harness: fault schedules and the soak's check

Typical use::

    from sim import Scenario, run_scenario
    result = run_scenario(Scenario.from_toml("my.toml"), seed=1, out_dir="out/run1")
    result.summary["rebalance_time_max_s"]
"""

# First, before any module it may have compiled: which build this process imports (the compiled
# modules, or their source; ``sim.compiled``)
from sim import compiled as compiled
from sim.config import (
    AssignorCost,
    ConfigError,
    ConsumerConfig,
    GroupConfig,
    Latency,
    NetworkConfig,
    SimConfig,
    TopicConfig,
)
from sim.errors import InvariantViolation
from sim.run import RunResult, run_scenario
from sim.scenario.actions import ACTIONS
from sim.scenario.scenario import Scenario

__all__ = [
    "ACTIONS",
    "AssignorCost",
    "ConfigError",
    "ConsumerConfig",
    "GroupConfig",
    "InvariantViolation",
    "Latency",
    "NetworkConfig",
    "RunResult",
    "Scenario",
    "SimConfig",
    "TopicConfig",
    "run_scenario",
]
