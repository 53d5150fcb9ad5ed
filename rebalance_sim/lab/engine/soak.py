"""The soak's product side: a failing schedule written as a scenario file (``write_replay``), and
many schedules checked as Spark tasks (``run_on_spark``). The schedules and their check are the
simulation harness's (``sim.testing.soak``). The command is ``rebalance_sim.cli.soak``.
"""

from __future__ import annotations

from pathlib import Path

from sim.testing.soak import check, replay_toml


def write_replay(out: Path, seed: int, index: int, max_faults: int) -> Path:
    """Write schedule ``index`` as a scenario TOML file under ``out``; return its path."""
    from ..atomic import atomic_write_text

    path = out / f"soak-{seed}-{index}.toml"
    atomic_write_text(path, replay_toml(seed, index, max_faults, str(path)))
    return path


class SoakTask:
    """The mapInPandas function of ``--spark``: one row per schedule index in, one out."""

    def __init__(self, seed: int, max_faults: int, kernel: str | None = None):
        self.seed = seed
        self.max_faults = max_faults
        self.kernel = kernel

    def __call__(self, batches):
        import pandas as pd

        for batch in batches:
            rows = []
            for index in batch["index"]:
                sim_seed, found = check(self.seed, int(index), self.max_faults, self.kernel)
                rows.append((int(index), sim_seed, "\n".join(found)))
            yield pd.DataFrame(rows, columns=["index", "sim_seed", "problems"])


def run_on_spark(
    master: str | None, seed: int, max_faults: int, kernel: str | None, indices: list[int]
) -> dict[int, list[str]]:
    """Check schedules ``indices`` of soak seed ``seed`` as Spark tasks; returns each failing
    schedule's problems by index."""
    import pandas as pd

    from .spark import get_spark

    spark = get_spark(master)
    slices = max(1, min(len(indices), 64))
    df = spark.createDataFrame(pd.DataFrame({"index": indices})).repartition(slices)
    rows = (
        df.mapInPandas(
            SoakTask(seed, max_faults, kernel), "index long, sim_seed long, problems string"
        )
        .toArrow()
        .to_pandas()
    )
    return {int(r.index): r.problems.split("\n") for r in rows.itertuples() if r.problems}
