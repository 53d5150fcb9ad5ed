"""``rebalance-sim plan``: a capacity plan for the user's own consumer group.

The group as it runs today (a group file, or the text ``kafka-consumer-groups.sh --describe``
prints), put through a deploy, a crash, a slow member and a scale-out, today and under the
alternatives that apply to it, at today's size and as the group grows; the runs go through the
sweep engine (``rebalance_sim.lab.engine``) and end in a report whose first screen answers in
sentences computed from its own tables.

Modules:
  group      the group file: ``Group`` (what the plan knows about the group), ``load_group``,
             ``PlanError`` (bad input, one line)
  describe   the text of ``kafka-consumer-groups.sh --describe`` (members, offsets, state views;
             Kafka 2.x-3.x and 4.x layouts) read into a ``Group``
  example    the commented group file ``plan --example`` prints
  variants   today's set-up and the alternatives that apply to it
  runs       which simulations a plan runs: faults, sizes, seeds, scenario files, cost estimates
  limits     the limits a run crossed (callbacks past max.poll.interval.ms, sessions expired,
             rebalance timeouts), read from the runs' events
  tables     the plan's tables: per fault, size and set-up, medians with p10-p90 bands
  execute    the two phases on Spark (today's size, then growth), aggregation and the report
"""
