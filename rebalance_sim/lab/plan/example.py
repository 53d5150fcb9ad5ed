"""The commented group file ``rebalance-sim plan --example`` prints (``examples/plan.toml`` is
the same text): the question of issue 44, 800 consumers on 2,400 partitions whose deploys restart
10% at a time and whose onPartitionsAssigned warms a cache for 200 ms per partition."""

EXAMPLE = """\
# A consumer group as it runs today, for `rebalance-sim plan FILE`.
# Everything but `members` and [[topics]] is optional; what is left out is Kafka's default.
# Client and broker settings take Kafka's names ("max.poll.interval.ms") or ours
# (max_poll_interval_ms); `rebalance-sim show rolling-deploy` lists every client setting.

name = "orders-consumers"          # a label for the report
members = 800                      # consumers in the group today
broker_version = "4.3"             # the brokers' Kafka version: "4.3" or "4.0"

[[topics]]                         # every topic the group subscribes to
name = "orders"
partitions = 2400
rate = 100.0                       # records/s produced per partition (Kafka does not know it:
                                   # your producers' rate; left out, 100)

[consumer]                         # what every member runs
group_protocol = "classic"         # group.protocol: classic | consumer (KIP-848)
partition_assignment_strategy = ["range", "cooperative-sticky"]
                                   # Kafka's default list: the group uses the first, range (eager)
static = false                     # true: group.instance.id set (static membership, KIP-345)
capacity = 1000.0                  # records/s one member processes (left out, 10,000)
assign_cost_ms = 200.0             # onPartitionsAssigned: time per partition (a cache warmed)
revoke_cost_ms = 0.0               # onPartitionsRevoked: time per partition (a final commit)
# "session.timeout.ms" = 45000     # any other client setting you changed, by Kafka's name
# "max.poll.interval.ms" = 300000
# "heartbeat.interval.ms" = 3000

[broker]                           # coordinator settings you changed, by Kafka's name
# "group.initial.rebalance.delay.ms" = 3000
# "group.consumer.session.timeout.ms" = 45000
# "group.consumer.heartbeat.interval.ms" = 5000

[deploy]                           # how a deploy restarts the group
batch_size = "10%"                 # members restarted at a time: a count, or a share of them
down_s = 30.0                      # how long each member is down
gap_s = 20.0                       # between a batch being back and the next one stopping
graceful = true                    # members close() (and leave the group) when stopped

[faults]                           # the other faults the plan puts the group through
slow_poll_s = 30.0                 # a slow member: one poll batch takes this long
scale_out = "10%"                  # a scale-out: members added at once

[plan]
growth = [2, 5]                    # sizes to try, as multiples of today's (members and
                                   # partitions together; never past 10,000 members)
"""
