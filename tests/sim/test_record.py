"""What a run keeps (``run_scenario``'s ``record``) never changes what it measures, and the zombie
check fed as the run goes answers as the check over the whole events table did."""

from __future__ import annotations

import bisect
import itertools
import json
from collections import defaultdict
from pathlib import Path

import pytest

from sim import run_scenario
from sim.config import ConfigError
from sim.observe.events import DOWNGRADE, GroupConverted, member_id_of
from sim.observe.invariants import check_run_with_hazards
from sim.observe.recorder import table_rows
from sim.observe.zombies import ZOMBIE_KINDS, tracker_from_rows
from sim.run import KEPT_FOR_EPISODES
from sim.scenario.builtins import BUILTINS, load_scenario

CASES = Path(__file__).parent / "soak_cases"
_WALL = ("wall_s", "messages_per_wall_s")


def _measured(result) -> str:
    summary = {k: v for k, v in result.summary.items() if k not in _WALL}
    return json.dumps([summary, result.episodes, result.invariant_violations], sort_keys=True)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_level_measures_the_same(name, protocol):
    overrides = {"members": "5"}
    if protocol == "consumer":
        overrides["consumer.group_protocol"] = "consumer"
    scenario = load_scenario(name, overrides)
    full = run_scenario(scenario, seed=0, raise_on_violation=False, record="all")
    lean = run_scenario(scenario, seed=0, raise_on_violation=False, record="episodes")
    bare = run_scenario(scenario, seed=0, raise_on_violation=False, record="none")
    assert _measured(lean) == _measured(full) == _measured(bare)
    # "episodes" keeps every interval and exactly the events of the kinds it reads
    kinds = set(full.events.column("kind").to_pylist())
    assert set(lean.events.column("kind").to_pylist()) == kinds & KEPT_FOR_EPISODES
    assert lean.intervals.equals(full.intervals)
    assert lean.events.num_rows < full.events.num_rows
    assert bare.events.num_rows == bare.intervals.num_rows == 0
    assert full.runs.column("record").to_pylist() == ["all"]


def test_an_unknown_level_is_refused():
    with pytest.raises(ConfigError, match="record"):
        run_scenario(load_scenario("scale-out"), record="some")


class _TableZombies:
    """The zombie check as it was made over a whole events table (kept here as the oracle)."""

    def __init__(self, events):
        self.syncs = defaultdict(list)
        self.classic_sync = {}
        self.added = defaultdict(list)
        self.removed = defaultdict(list)
        self.joined = defaultdict(list)
        self.completed = []
        for i, (t, kind, member, gen, detail) in enumerate(events):
            if kind in ("sync_received", "assignment_received") and member:
                member_id = member_id_of(detail)
                if member_id is not None:
                    self.syncs[member].append((t, i, member_id))
                    self.classic_sync[(member, i)] = kind == "sync_received"
            elif kind in ("member_removed", "member_fenced", "member_added"):
                member_id = member_id_of(detail)
                if member_id is not None:
                    (self.added if kind == "member_added" else self.removed)[member_id].append(
                        (t, i)
                    )
            elif kind == "join_received" and member:
                self.joined[member].append((t, gen))
            elif kind == "join_complete" or (
                kind == "group_converted" and GroupConverted.decode(detail).direction == DOWNGRADE
            ):
                self.completed.append((t, gen))

    def zombie(self, client, t):
        syncs = self.syncs.get(client, [])
        i = bisect.bisect_right(syncs, (t, float("inf"))) - 1
        if i < 0:
            return False
        synced_t, synced_i, member_id = syncs[i]
        adds = self.added.get(member_id, [])
        k = bisect.bisect_left(adds, (synced_t, synced_i)) - 1
        since = adds[k] if k >= 0 else (float("-inf"), -1)
        removals = self.removed.get(member_id, [])
        r = bisect.bisect_right(removals, since)
        if r < len(removals) and removals[r][0] <= t:
            return True
        if not self.classic_sync[(client, synced_i)]:
            return False
        j = bisect.bisect_right(self.completed, (t, float("inf"))) - 1
        if j < 0:
            return False
        joins = self.joined.get(client, [])
        k = bisect.bisect_right(joins, (t, float("inf"))) - 1
        return k < 0 or joins[k][1] < self.completed[j][1]


# runs with zombies: paused members, static members left out of a generation, fenced members,
# migrations both ways (soak schedules kept as cases)
_ZOMBIE_RUNS = [
    ("gc-pause-zombie", {}, 0),
    ("gc-pause-zombie", {"consumer.group_protocol": "consumer"}, 1),
    ("rolling-bounce-static", {"members": "8"}, 2),
    ("protocol-migration", {"members": "8"}, 0),
    ("protocol-migration", {"members": "8", "to": "classic"}, 3),
    (str(CASES / "migration-downgrade-then-upgrade-281.toml"), {}, 61654),
    (str(CASES / "migration-static-upgrade-681.toml"), {}, 27441),
]


@pytest.mark.parametrize(("name", "overrides", "seed"), _ZOMBIE_RUNS)
def test_zombie_tracker_answers_as_the_whole_table(name, overrides, seed):
    result = run_scenario(load_scenario(name, overrides), seed=seed, raise_on_violation=False)
    cols = ["t", "kind", "member", "generation", "detail"]
    rows = table_rows(result.events, cols, ZOMBIE_KINDS)
    oracle = _TableZombies(rows)
    tracker = tracker_from_rows(rows)
    clients = sorted({m for _t, _k, m, _g, _d in rows if m})
    instants = sorted({t for t, *_ in rows})
    probes = instants + [(a + b) / 2 for a, b in itertools.pairwise(instants)]
    zombies_seen = 0
    for client in clients:
        for t in probes:
            expected = oracle.zombie(client, t)
            assert tracker.zombie(client, t) == expected, (client, t)
            zombies_seen += expected
    assert zombies_seen > 0  # the run has zombies to tell apart
    # the tracker fed as the run went finds what the one built from the table finds
    again, hazards = check_run_with_hazards(
        result.events,
        result.intervals,
        settled=True,
        cooperative="cooperative" in json.dumps(result.invariant_violations),
    )
    assert [v for v in again if "at once" in v] == [
        v for v in result.invariant_violations if "at once" in v
    ]
    assert hazards == {k: result.summary[k] for k in hazards}


def test_streamed_events_file_is_the_whole_table(tmp_path, monkeypatch):
    """Events written as the run goes, a row group at a time, make the same table as the run that
    holds them all; the run holds only the rows its metrics read, and measures the same."""
    from sim.observe import recorder

    monkeypatch.setattr(recorder, "STREAM_CHUNK_ROWS", 100)  # many row groups
    import pyarrow.parquet as pq

    scenario = load_scenario("rolling-bounce-dynamic", {"members": "6"})
    full = run_scenario(scenario, seed=4, raise_on_violation=False)
    path = tmp_path / "events.parquet"
    streamed = run_scenario(scenario, seed=4, raise_on_violation=False, events_path=path)
    table = pq.read_table(path)
    assert pq.ParquetFile(path).metadata.num_row_groups > 2
    assert table.equals(full.events)
    assert set(streamed.events.column("kind").to_pylist()) <= KEPT_FOR_EPISODES
    assert _measured(streamed) == _measured(full)
    assert [p.name for p in tmp_path.iterdir()] == ["events.parquet"]  # no temporary file left
    with pytest.raises(ConfigError, match="events_path"):
        run_scenario(scenario, record="none", events_path=path)
