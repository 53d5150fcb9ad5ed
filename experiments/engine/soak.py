"""Deterministic simulation testing: random fault schedules, each run and checked.

Schedule ``index`` of soak seed ``seed`` is a scenario with random faults
(``experiments.engine.schedules``) and a simulation seed, drawn from a ``random.Random`` of its
own, so it depends on nothing else and replays exactly. ``check`` runs one and lists what is wrong
with it: an invariant violation (checked inside every run), no liveness (the group never settles
once the faults are over) or a partition that does not end with exactly one owner. ``run_on_spark``
checks many as Spark tasks. The command is ``experiments.cli.soak``.
"""

from __future__ import annotations

import random
from pathlib import Path

# A run that delivers this many inputs without settling is a liveness failure, not a hang.
MAX_EVENTS = 3_000_000
MAX_FAULTS = 8


def schedule(seed: int, index: int, max_faults: int = MAX_FAULTS) -> tuple[dict, int]:
    """Schedule ``index`` of soak seed ``seed``: (scenario table, simulation seed)."""
    from ..engine.schedules import RandomChooser, faulty_scenario

    rng = random.Random(f"rebalance-sim soak {seed} {index}")
    data = faulty_scenario(RandomChooser(rng), max_faults=max_faults, name=f"soak-{seed}-{index}")
    return data, rng.randrange(2**16)


def problems(result) -> list[str]:
    """What is wrong with a finished run: invariant violations, no liveness, a partition without
    exactly one owner at the end. Empty when the run is fine."""
    s = result.summary
    out = list(result.invariant_violations)
    if s.get("partial"):
        out.append(f"did not finish: {s['partial_reason']}")
    elif not s["settled_at_end"]:
        out.append("settled_at_end is false (the group never settled after the last fault)")
    end = s["simulated_s"]
    owners: dict[tuple, list] = {}
    for r in result.intervals.to_pylist():
        if r["kind"] == "owned" and r["end"] >= end:
            owners.setdefault((r["topic"], r["partition"]), []).append(r["member"])
    out += [
        f"{t}-{p} ends with {len(m)} owners ({', '.join(m)})"
        for (t, p), m in sorted(owners.items())
        if len(m) != 1
    ]
    return out


def check(
    seed: int, index: int, max_faults: int = MAX_FAULTS, kernel: str | None = None
) -> tuple[int, list[str]]:
    """Run schedule ``index`` (with ``kernel``, see ``sim.kernel``) and return (simulation seed,
    problems); nothing escapes."""
    from sim import Scenario, run_scenario

    data, sim_seed = schedule(seed, index, max_faults)
    try:
        result = run_scenario(
            Scenario.from_dict(data),
            seed=sim_seed,
            raise_on_violation=False,
            max_events=MAX_EVENTS,
            kernel=kernel,
            check_settled=True,
        )
    except Exception as e:  # a crash of the simulator is a finding like any other
        return sim_seed, [f"raised {type(e).__name__}: {' '.join(str(e).split())}"]
    return sim_seed, problems(result)


def write_replay(out: Path, seed: int, index: int, max_faults: int) -> Path:
    """Write schedule ``index`` as a scenario TOML file under ``out``; return its path."""
    from sim.builtin_scenarios import to_toml

    from ..atomic import atomic_write_text

    data, sim_seed = schedule(seed, index, max_faults)
    path = out / f"soak-{seed}-{index}.toml"
    atomic_write_text(
        path,
        f"# rebalance-sim soak --seed {seed}: schedule {index}\n"
        f"# replay: rebalance-sim run {path} --seed {sim_seed}\n" + to_toml(data),
    )
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
