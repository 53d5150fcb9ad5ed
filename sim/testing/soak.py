"""Deterministic simulation testing: random fault schedules, each run and checked.

Schedule ``index`` of soak seed ``seed`` is a scenario with random faults (``sim.testing.schedules``)
and a simulation seed, drawn from a ``random.Random`` of its own, so it depends on nothing else and
replays exactly. ``check`` runs one and lists what is wrong with it (``problems``): an invariant
violation (checked inside every run), no liveness (the group never settles once the faults are
over) or a partition that does not end with exactly one owner. ``replay_toml`` is a schedule as a
scenario file that replays it. The command is ``rebalance-sim soak`` (``rebalance_sim.cli.soak``),
which also checks many schedules as Spark tasks (``rebalance_sim.lab.engine.soak``).
"""

from __future__ import annotations

import random

from sim.run import run_scenario
from sim.scenario.builtins import to_toml
from sim.scenario.scenario import Scenario
from sim.testing.schedules import RandomChooser, faulty_scenario

# A run that delivers this many inputs without settling is a liveness failure, not a hang.
MAX_EVENTS = 3_000_000
MAX_FAULTS = 8


def schedule(seed: int, index: int, max_faults: int = MAX_FAULTS) -> tuple[dict, int]:
    """Schedule ``index`` of soak seed ``seed``: (scenario table, simulation seed)."""
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


def replay_toml(seed: int, index: int, max_faults: int, path: str) -> str:
    """Schedule ``index`` of soak seed ``seed`` as the text of a scenario file at ``path``, with
    the command that replays it."""
    data, sim_seed = schedule(seed, index, max_faults)
    return (
        f"# rebalance-sim soak --seed {seed}: schedule {index}\n"
        f"# replay: rebalance-sim run {path} --seed {sim_seed}\n" + to_toml(data)
    )
