"""The simulator: a Kafka consumer group's rebalances as actors in virtual time.

The group coordinator, each client process and the director playing the timeline are actors
(``actors``). ``run_scenario(..., kernel="tasks")`` runs each of them as a trio task of its own,
handed its inputs through trio in virtual time (trio's ``MockClock``); the default, "inline",
calls the same actors with the same inputs in the same order from one trio task, and is faster.
Both give the same results (``kernel``).

The protocol logic is in sans-I/O cores (state + input -> effects, no clock, no trio). A client
core is a ``client.ConsumerClient`` (poll loop, positions, offsets and commits, callbacks,
pauses) of one of two subclasses, one per group protocol: ``member.Member`` (classic) and
``consumer_member.ConsumerMember`` (KIP-848). Each client runs the protocol of its own config;
the group is one coordinator (``migration``) that holds a classic or a consumer group and converts
between them as members of the other protocol come and go (KIP-848's online migration); the run
reads the record of the group's current type (``protocols``): member core, settled check, phases.

Layout:
  config      SimConfig and its parts (Kafka's names and defaults), ConfigError
  scenario    Scenario = SimConfig + timeline of actions, from a dict or TOML file
  protocols   one record per group.protocol (member core factory, settled check), the group
  builtin_scenarios  the named built-in scenarios; load_scenario (a built-in or a TOML file)
  group       the coordinator's classic group state machine (sans-I/O core)
  client      ConsumerClient: what both protocols' client cores share (sans-I/O core)
  member      Member: the classic ConsumerCoordinator logic (a ConsumerClient)
  consumer_group   the coordinator of the consumer group protocol, KIP-848 (sans-I/O core)
  consumer_member  ConsumerMember: the new consumer's membership and reconciliation (a ConsumerClient)
  classic_bridge   the consumer group coordinator serving classic members (JoinGroup/SyncGroup/...)
  migration   the group as either type, and its conversions between them (online migration)
  target_assignment  the server-side assignor call behind KIP-848's target assignment
  handoffs    the partitions' hand-overs between owners, shared by the clients of a run
  cooperative the cooperative-rebalance check of an assignment (arrays)
  kernel      the deterministic input queue and the two kernels that deliver it (tasks, inline)
  actors      the coordinator, client and director actors that drive the cores
  network     latency, drops, delay spikes, one-way partitions
  recorder    events / intervals rows and Parquet output
  metrics     every metric, computed from events and intervals in one place
  invariants  run-level checks
  run         run_scenario -> RunResult
  compiled    which build runs: the hot modules compiled with mypyc (scripts/build_compiled.py),
              or their source (REBALANCE_SIM_PURE=1, or a stale build)

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
