"""Shared pytest configuration."""

from hypothesis import HealthCheck, settings

# The default run is derandomized, so a test run (and CI) is the same on every machine; new
# schedules are explored with ``--hypothesis-profile explore`` and by ``rebalance-sim soak``.
settings.register_profile(
    "default",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    database=None,
)
settings.register_profile(
    "explore", deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")
