"""Digests of today's runs, to hold behaviour still while the code around it moves.

``python tests/sim/golden.py --write`` records, for every built-in under both group protocols at
two sizes, a SHA-256 of the run's events and intervals (Parquet
bytes, without the ``run_id`` column, which hashes the configuration and so changes whenever a
setting is added) and of its episodes, summary (but for wall time and the run id) and
violations (but for ``LEFT_OUT``). The events are written to a file as the run goes and hashed
``CHUNK_ROWS`` at a time, so a digest never holds a run's events (a run with fewer rows is one
chunk: its digest is that of the whole table). ``tests/sim/test_golden.py`` recomputes them and compares.

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
# Left out: Kafka 4.0's fencing loop at 24 members (11 million events: a minute and more of every
# test run, minutes on the Python source). The loop at 5 members covers the same code.
LEFT_OUT = frozenset({"slow-assignor consumer members=24 seed=1"})
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


# Rows of the events file hashed at a time: a run's events are hashed a chunk at a time, never
# held whole (one built-in, Kafka 4.0's fencing loop, has 11 million). A run with fewer events
# is one chunk, hashed as the whole table always was.
CHUNK_ROWS = 1 << 20


def _events_chunks(path):
    """The events file at ``path`` without ``run_id``, as tables of ``CHUNK_ROWS`` rows (the last
    one shorter), whatever its row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    columns = [c for c in f.schema_arrow.names if c != "run_id"]
    held: list = []
    rows = 0
    for batch in f.iter_batches(batch_size=1 << 16, columns=columns):
        held.append(batch)
        rows += batch.num_rows
        while rows >= CHUNK_ROWS:
            table = pa.Table.from_batches(held)
            yield table.slice(0, CHUNK_ROWS)
            rest = table.slice(CHUNK_ROWS)
            held, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield pa.Table.from_batches(held)
    elif not f.metadata.num_rows:
        yield f.schema_arrow.remove(f.schema_arrow.get_field_index("run_id")).empty_table()


def run(scenario, seed: int, **kw) -> list:
    """Run ``scenario`` with ``seed``, its events written to a file as it goes, and return its
    digest (``digest``)."""
    import tempfile

    from sim import run_scenario

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.parquet"
        result = run_scenario(scenario, seed=seed, raise_on_violation=False, events_path=path, **kw)
        return digest(result, path)


def digest(result, events_path) -> list:
    """[rows of events, SHA-256 of the events (``events_path``: the run's events file), intervals,
    episodes, summary (without wall time and run id) and violations]."""
    import pyarrow.parquet as pq

    h = hashlib.sha256()
    for chunk in _events_chunks(events_path):
        h.update(_table_bytes(chunk))
    h.update(_table_bytes(result.intervals))
    summary = {
        k: v
        for k, v in result.summary.items()
        if k not in _WALL and not (k in _ADDED_ZERO and v == 0)
    }
    rest = [result.episodes, summary, result.invariant_violations]
    h.update(json.dumps(rest, sort_keys=True, default=repr).encode())
    return [pq.ParquetFile(events_path).metadata.num_rows, h.hexdigest()]


def compute() -> dict[str, list]:
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
                key = f"{name} {protocol} members={members} seed={seed}"
                if key not in LEFT_OUT:
                    out[key] = run(load_scenario(name, overrides), seed)
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
        runs[f"soak 0 schedule {index}"] = run(
            Scenario.from_dict(data), seed, max_events=soak.MAX_EVENTS
        )
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
