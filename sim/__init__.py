"""The simulator: a Kafka consumer group's rebalances as actors in virtual time.

The group coordinator, each client process and the director playing the timeline are actors
(``actors``). ``run_scenario(..., kernel="tasks")`` runs each of them as a trio task of its own,
handed its inputs through trio in virtual time (trio's ``MockClock``); the default, "inline",
calls the same actors with the same inputs in the same order from one trio task, and is faster.
Both give the same results (``kernel``).

Layout:
  config      SimConfig and its parts (Kafka's names and defaults), ConfigError
  scenario    Scenario = SimConfig + timeline of actions, from a dict or TOML file
  builtin_scenarios  the named built-in scenarios; load_scenario (a built-in or a TOML file)
  group       the coordinator's classic group state machine (sans-I/O core)
  member      the consumer's ConsumerCoordinator logic (sans-I/O core)
  consumer_group   the coordinator of the consumer group protocol, KIP-848 (sans-I/O core)
  consumer_member  the new consumer's membership and reconciliation logic (sans-I/O core)
  target_assignment  the server-side assignor call behind KIP-848's target assignment
  kernel      the deterministic input queue and the two kernels that deliver it (tasks, inline)
  actors      the coordinator, client and director actors that drive the cores
  network     latency, drops, delay spikes, one-way partitions
  recorder    events / intervals rows and Parquet output
  metrics     every metric, computed from events and intervals in one place
  invariants  run-level checks
  run         run_scenario -> RunResult

Typical use::

    from sim import Scenario, run_scenario
    result = run_scenario(Scenario.from_toml("my.toml"), seed=1, out_dir="out/run1")
    result.summary["rebalance_time_max_s"]
"""

from .config import (
    AssignorCost,
    ConfigError,
    ConsumerConfig,
    GroupConfig,
    Latency,
    NetworkConfig,
    SimConfig,
    TopicConfig,
)
from .run import InvariantViolation, RunResult, run_scenario
from .scenario import ACTIONS, Scenario

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
