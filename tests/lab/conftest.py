"""Fixtures of the experiments tests: one local SparkSession shared by the whole test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """The process's SparkSession (local[*]); started once, because the JVM takes 10-20 s."""
    from rebalance_sim.lab.engine.spark import get_spark, stop_spark

    session = get_spark("local[2]")
    yield session
    stop_spark()


def pytest_configure(config):
    # pyspark 4.x warns on every pandas >= 3 conversion; the APIs used here are fine with it.
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )
    config.addinivalue_line("filterwarnings", "ignore:The copy keyword is deprecated")
