"""The names an experiment's declaration (``rebalance_sim.lab.catalog``) and its report recipe
(``rebalance_sim.lab.report``) share: the values of the ``assignor`` column, the scenario labels, the
consumer every experiment simulates and the Kafka defaults the pages quote.

Both sides import them from here, so the catalog can name its report recipe while no report module
imports a declaration; what changes with ``--scale`` reaches the recipe as data (the scale).
"""

from __future__ import annotations

# The consumer group protocol (KIP-848) with the coordinator's uniform assignor (the broker's
# default server-side assignor), as a value of the ``assignor`` column beside the classic assignors.
CONSUMER = "consumer-uniform"

# The classic assignors the main job compares, eager first (ConsumerPartitionAssignor's
# RebalanceProtocol: range, roundrobin and sticky are EAGER, cooperative-sticky COOPERATIVE).
CLASSIC_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
# The main job's ``assignor`` column: the classic assignors, then the consumer protocol.
MAIN_JOB_VARIANTS = (*CLASSIC_ASSIGNORS, CONSUMER)
MAIN_JOB_SCENARIOS = ("scale-out", "crash", "rolling-deploy")

# The protocols experiment's three protocols as values of the ``assignor`` column.
EAGER = "range"
COOPERATIVE = "cooperative-sticky"
PROTOCOLS = (EAGER, COOPERATIVE, CONSUMER)
PROTOCOLS_SCENARIOS = ("scale-out", "crash", "rolling-deploy", "slow-member")
# The online migration (the rolling deploy onto the consumer protocol), from each classic protocol.
MIGRATION = "protocol-migration"
MIGRATION_FROM = (EAGER, COOPERATIVE)
SLOW_POLL_S = 30.0  # one poll batch of the protocols experiment's slow member, in seconds

CLASSIC_HEARTBEAT_MS = 3000  # heartbeat.interval.ms, the classic client's default
CONSUMER_HEARTBEAT_MS = 5000  # group.consumer.heartbeat.interval.ms, the broker's default (KIP-848)

# A plain (stateless) consumer doing real work per record: 500 records/s per member, so a
# 500-record poll batch takes up to 1 s (members react to a rebalance between batches), plus
# rebalance-listener costs per partition: flush and commit on revoke, re-open state on assign.
CONSUMER_PROFILE = {"capacity": 500.0, "revoke_cost_ms": 10.0, "assign_cost_ms": 50.0}

# The deploy: every member restarts once, a quarter of the group at a time (Kubernetes' default
# maxUnavailable for a Deployment), 10 s down, 20 s between batches. Four batches at every size,
# so the run cost grows with the group like the other scenarios'.
DEPLOY_BATCH = "25%"

# The built-ins' fault time and its jitter (sim.scenario.builtins); later faults move by multiples
# of the jitter's period.
BUILTIN_FAULT_S = 60.0
BUILTIN_JITTER_S = 15.0


# The events the lab's tables and pages read from a sweep's runs, beyond those the simulator's
# metrics and invariants read (``sim.run.KEPT_FOR_EPISODES``). A sweep stores these and drops the
# rest (rebalance_sim.lab.engine.task): a large group's JoinGroup/SyncGroup or reconciliation
# traffic is most of its events and no page reads it. A page that reads another kind adds it here.
ASSIGNMENT_EVENTS = ("assignment_computed", "target_assignment")  # the time spent assigning
LIMIT_EVENTS = ("poll_timeout", "member_removed", "crash", "assign", "revoke")  # a plan's limits
# the protocols page's 4.0 fencing loop: target computations, fenced heartbeats, and the events
# that carry the group epoch as it moves (its highest)
LOOP_EVENTS = (
    "target_assignment",
    "fenced_epoch",
    "member_added",
    "member_removed",
    "member_fenced",
)
STORED_EVENT_KINDS = tuple(dict.fromkeys(ASSIGNMENT_EVENTS + LIMIT_EVENTS + LOOP_EVENTS))
