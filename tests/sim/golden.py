"""Digests of today's runs, to hold behaviour still while the code around it moves.

``python tests/sim/golden.py --write`` records, for every built-in under both group protocols at
two sizes, a SHA-256 of the run's events and intervals (Parquet
bytes, without the ``run_id`` column, which hashes the configuration and so changes whenever a
setting is added) and of its episodes, summary (but for wall time and the run id) and
violations. ``tests/sim/test_golden.py`` recomputes them and compares.

``PINNED`` are the settings that keep a run on the behaviour the digests were taken under when a
later default moves (a new default assignor cost, a newer Kafka version's coordinator): the
digests stand for *that* behaviour, which must stay reproducible byte for byte.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIGESTS = HERE / "golden_digests.json"

# (members, seed) per built-in and protocol.
SIZES = ((5, 0), (24, 1))
# Soak schedules (crashes, pauses, partitions, loss, lognormal latency and drops) that
# tests/sim/test_compiled.py runs on both builds besides the built-ins.
SOAK_SAMPLE = range(0, 40, 5)
# Settings that select today's behaviour once the defaults move (see the module docstring).
# A built-in that sets one of these itself (``slow-assignor``'s ``assignor_cost``) keeps its own.
PINNED: dict[str, str] = {"assignor_cost": "zero", "kafka_version": "4.0"}
_WALL = {"wall_s", "messages_per_wall_s", "run_id"}
# Summary keys added after the digests were recorded, left out of a digest while they are zero
# (a run that has one above zero no longer matches its recorded digest).
_ADDED_ZERO = {"kafka_hazard_double_ownership_partition_s", "kafka_hazard_records_processed_twice"}


def _table_bytes(table) -> bytes:
    import pyarrow.parquet as pq

    if "run_id" in table.column_names:
        table = table.drop_columns(["run_id"])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def digest(result) -> list:
    h = hashlib.sha256()
    h.update(_table_bytes(result.events))
    h.update(_table_bytes(result.intervals))
    summary = {
        k: v
        for k, v in result.summary.items()
        if k not in _WALL and not (k in _ADDED_ZERO and v == 0)
    }
    rest = [result.episodes, summary, result.invariant_violations]
    h.update(json.dumps(rest, sort_keys=True, default=repr).encode())
    return [result.events.num_rows, h.hexdigest()]


def compute() -> dict[str, list]:
    from sim import run_scenario
    from sim.scenario.builtins import BUILTINS, builtin_dict, load_scenario

    out: dict[str, list] = {}
    for name in sorted(BUILTINS):
        for protocol in ("classic", "consumer"):
            for members, seed in SIZES:
                own = builtin_dict(name)
                pinned = {k: v for k, v in PINNED.items() if k not in own}
                overrides = {"members": str(members), **pinned}
                if protocol == "consumer":
                    overrides["consumer.group_protocol"] = "consumer"
                result = run_scenario(
                    load_scenario(name, overrides), seed=seed, raise_on_violation=False
                )
                out[f"{name} {protocol} members={members} seed={seed}"] = digest(result)
    return out


def build_runs(soak_indices) -> dict:
    """What ``tests/sim/test_compiled.py`` compares between the two builds, from the build this
    process imports: the built-ins' digests (``compute``), some soak schedules' digests, and what a
    finished run leaves to the cyclic collector (``sim.world.runner.release_world`` frees the rest
    as it returns)."""
    import gc

    import sim.compiled
    import sim.kernel.queue
    from sim import Scenario, run_scenario
    from sim.scenario.builtins import load_scenario
    from sim.testing import soak

    runs = compute()
    for index in soak_indices:
        data, seed = soak.schedule(0, index)
        result = run_scenario(
            Scenario.from_dict(data),
            seed=seed,
            raise_on_violation=False,
            max_events=soak.MAX_EVENTS,
        )
        runs[f"soak 0 schedule {index}"] = digest(result)
    gc.collect()
    gc.disable()
    try:
        run_scenario(load_scenario("rolling-deploy", {"members": "40"}), seed=0)
        garbage = gc.collect()
    finally:
        gc.enable()
    return {
        "status": sim.compiled.status(),
        "garbage": garbage,
        "kernel_module": sim.kernel.queue.__file__,
        "runs": runs,
    }


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))
    if "--build-runs" in sys.argv:  # the other build's side of tests/sim/test_compiled.py
        print(json.dumps(build_runs(json.loads(sys.argv[-1]))))
        sys.exit(0)
    runs = compute()
    if "--write" in sys.argv:
        DIGESTS.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    else:
        print(json.dumps(runs, indent=1, sort_keys=True))
