"""The deterministic-simulation harness: random scenarios with fault schedules drawn from any
source of choices (``schedules``: Hypothesis in the property tests, a seeded ``random.Random`` in
the soak) and the soak's check of one schedule (``soak``). Spark's fan-out of the soak is
``rebalance_sim.lab.engine.soak``'s.
"""
