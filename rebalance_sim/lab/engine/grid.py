"""Grid files: which simulations a sweep runs, as ``RunSpec``s validated on the driver.

Grid file (TOML)::

    # Which simulations to run: every combination of scenarios x assignors x [vary] x seeds.
    name = "my-sweep"                          # optional, used in progress lines
    scenarios = ["crash", "scale-out"]         # built-in names or scenario TOML paths
                                               # (relative paths are relative to this file)
    assignors = ["range", "cooperative-sticky"]   # optional; omitted = each scenario's own
    seeds = 3                                  # N (seeds 0..N-1) or an explicit list [0, 7, 9]

    [set]                                      # overrides applied to every run
    partitions = 60

    [vary]                                     # one list per key; the lists are crossed
    members = [10, 100]
    static = [false, true]

``[set]`` and ``[vary]`` keys are the scenario loader's overrides (``key=value``, see
``rebalance-sim list``); dotted keys (``consumer.session_timeout_ms``) are allowed. Every point
is loaded and validated before anything runs; an error names the file, the field and what is
allowed, in one line.

``resolve`` loads every spec's scenario on the driver, so that a bad point fails before anything
runs, and gives each its ``run_id`` and estimated cost. Running the specs is
``rebalance_sim.lab.engine.sweep``'s (the driver) and ``rebalance_sim.lab.engine.task``'s (the executors).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

GRID_KEYS = ("name", "scenarios", "assignors", "seeds", "set", "vary")


class GridError(ValueError):
    """A grid file that cannot be run: one line naming the file and the field."""


@attrs.frozen
class RunSpec:
    """One simulation of a sweep: a scenario with overrides and a seed, at one parameter point.

    ``point`` holds the values that identify the parameter point (scenario, assignor and every
    ``[vary]`` key); aggregation groups runs by it across seeds.
    """

    scenario: str
    overrides: tuple[str, ...]
    seed: int
    point: tuple[tuple[str, Any], ...]
    run_id: str = ""
    cost: float = 0.0  # rough relative cost, to start the biggest runs first
    source: str = ""  # the text of a TOML scenario file, read on the driver (executors cannot)
    # the simulation kernel (``--kernel``; "" for the default): how the run is computed, not
    # which run it is (both kernels give the same results), so not part of its identity
    kernel: str = attrs.field(default="", eq=False)
    # whether the grid expects this run may end unsettled at its time limit (``max_duration_s``):
    # a group Kafka's coordinator keeps from settling, whose run is bounded on purpose. Its
    # "did not settle" violation is then its outcome, not a failure; any other violation still
    # is one (``rebalance_sim.lab.engine.sweep.judge_violations``). How the run is judged, not
    # which run it is, so not part of its identity.
    may_end_unsettled: bool = attrs.field(default=False, eq=False)

    def to_json(self) -> str:
        d = {
            "scenario": self.scenario,
            "overrides": list(self.overrides),
            "seed": self.seed,
            "point": [list(kv) for kv in self.point],
            "source": self.source,
        }
        if self.kernel:
            d["kernel"] = self.kernel
        if self.may_end_unsettled:
            d["may_end_unsettled"] = True
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, run_id: str = "") -> RunSpec:
        d = json.loads(text)
        return cls(
            d["scenario"],
            tuple(d["overrides"]),
            d["seed"],
            tuple((k, v) for k, v in d["point"]),
            run_id,
            source=d.get("source", ""),
            kernel=d.get("kernel", ""),
            may_end_unsettled=d.get("may_end_unsettled", False),
        )


def with_kernel(specs: Sequence[RunSpec], kernel: str | None) -> list[RunSpec]:
    """``specs`` to be run with the simulation kernel ``kernel`` (None: the default)."""
    return [attrs.evolve(s, kernel=kernel) for s in specs] if kernel else list(specs)


@attrs.frozen
class Grid:
    """A parsed grid file (see the module docstring)."""

    scenarios: tuple[str, ...]
    seeds: tuple[int, ...]
    assignors: tuple[str, ...] | None = None
    set: Mapping[str, Any] = attrs.field(factory=dict)
    vary: Mapping[str, Sequence[Any]] = attrs.field(factory=dict)
    name: str = "sweep"
    source: str = "<grid>"


# ---------------------------------------------------------------------------------------------
# Grid files


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys arrive as nested tables: ``consumer.static = x`` -> ``{"consumer.static": x}``."""
    out = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, Mapping):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float | str)


def load_grid(path: str | os.PathLike) -> Grid:
    """Parse and check a grid file; raises ``GridError`` naming the file and the field."""
    path = Path(path)
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise GridError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise GridError(f"{where}: is a directory, expected a grid TOML file") from None
    except UnicodeDecodeError as e:
        raise GridError(
            f"{where}: not a text file (byte {e.start}: not UTF-8); expected a grid TOML file"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{where}: not valid TOML: {' '.join(str(e).split())}") from None
    except OSError as e:
        raise GridError(f"{where}: cannot read: {e.strerror or e}") from None
    return grid_from_dict(data, where, base_dir=path.parent)


def grid_from_dict(
    data: Mapping[str, Any], where: str = "<grid>", base_dir: Path | None = None
) -> Grid:
    """A ``Grid`` from the parsed TOML document (see the module docstring for the fields)."""

    def fail(field: str, reason: str) -> GridError:
        return GridError(f"{where}: {field}: {reason}")

    for k in data:
        if k not in GRID_KEYS:
            raise fail(k, f"unknown key; allowed: {', '.join(GRID_KEYS)}")
    name = data.get("name", Path(where).stem if where != "<grid>" else "sweep")
    if not isinstance(name, str) or not name:
        raise fail("name", f"{name!r} is not a non-empty string")

    scenarios = data.get("scenarios")
    if scenarios is None:
        raise fail("scenarios", "missing; give a list of built-in scenario names or TOML paths")
    if isinstance(scenarios, str):
        scenarios = [scenarios]
    if (
        not isinstance(scenarios, list)
        or not scenarios
        or not all(isinstance(s, str) and s for s in scenarios)
    ):
        raise fail("scenarios", f"{scenarios!r} is not a non-empty list of scenario names or paths")
    resolved = []
    for s in scenarios:
        if s.endswith(".toml") and base_dir is not None and not os.path.isabs(s):
            s = str((base_dir / s).resolve())
        resolved.append(s)
    if len(set(resolved)) != len(resolved):
        raise fail("scenarios", f"{scenarios!r} names a scenario twice")

    assignors = data.get("assignors")
    if assignors is not None:
        from assignors import ASSIGNORS

        if isinstance(assignors, str):
            assignors = [assignors]
        if not isinstance(assignors, list) or not assignors:
            raise fail(
                "assignors",
                f"{assignors!r} is not a non-empty list; allowed: {', '.join(ASSIGNORS)}",
            )
        for a in assignors:
            if a not in ASSIGNORS:
                raise fail("assignors", f"{a!r} is not one of {', '.join(ASSIGNORS)}")
        if len(set(assignors)) != len(assignors):
            raise fail("assignors", f"{assignors!r} names an assignor twice")
        assignors = tuple(assignors)

    seeds = data.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise fail("seeds", f"{seeds} must be >= 1 (a count) or a list of seeds")
        seeds = list(range(seeds))
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
    ):
        raise fail("seeds", f"{seeds!r} is not a count >= 1 or a non-empty list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise fail("seeds", f"{seeds!r} repeats a seed")
    from sim.scenario.builtins import MAX_SEED

    if max(seeds) > MAX_SEED:
        raise fail("seeds", f"{max(seeds)} is above the largest seed, {MAX_SEED}")

    fixed = data.get("set", {})
    if not isinstance(fixed, Mapping):
        raise fail("set", "expected a table of key = value overrides")
    fixed = _flatten(fixed)
    for k, v in fixed.items():
        if not _scalar(v):
            raise fail(f"set.{k}", f"{v!r} is not a string, number or boolean")

    vary = data.get("vary", {})
    if not isinstance(vary, Mapping):
        raise fail("vary", "expected a table of key = [values]")
    vary = _flatten(vary)
    for k, values in vary.items():
        if not isinstance(values, list) or not values:
            raise fail(f"vary.{k}", f"{values!r} is not a non-empty list of values")
        for v in values:
            if not _scalar(v):
                raise fail(f"vary.{k}", f"{v!r} is not a string, number or boolean")
        kinds = {type(v) for v in values}
        if len(kinds) > 1 and kinds != {int, float}:
            raise fail(f"vary.{k}", f"{values!r} mixes types; use one type per key")
        if len(set(values)) != len(values):
            raise fail(f"vary.{k}", f"{values!r} repeats a value")
        if k in fixed:
            raise fail(f"vary.{k}", "is also in [set]; give it in one place")
        if k in ("scenario", "assignor", "seed"):
            raise fail(f"vary.{k}", f"use the top-level '{k}s' list instead")
    if "assignor" in fixed and assignors is not None:
        raise fail("set.assignor", "conflicts with the top-level 'assignors' list")
    return Grid(
        scenarios=tuple(resolved),
        seeds=tuple(seeds),
        assignors=assignors,
        set=fixed,
        vary={k: tuple(v) for k, v in vary.items()},
        name=name,
        source=where,
    )


def _override(key: str, value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"{key}={value}"


def column_name(key: str) -> str:
    """A grid key as a column name (no dots: Spark treats dots as struct access)."""
    return key.replace(".", "_").replace("-", "_")


def expand(grid: Grid) -> list[RunSpec]:
    """Every run of ``grid``, loaded and validated, with its ``run_id``; raises ``GridError``."""
    specs: list[RunSpec] = []
    keys = list(grid.vary)
    for scenario in grid.scenarios:
        for assignor in grid.assignors or (None,):
            for values in itertools.product(*(grid.vary[k] for k in keys)):
                overrides = [_override(k, v) for k, v in grid.set.items()]
                overrides += [_override(k, v) for k, v in zip(keys, values, strict=True)]
                if assignor is not None:
                    overrides.append(_override("assignor", assignor))
                point = [("scenario", _scenario_label(scenario)), ("assignor", assignor or "")]
                point += [(column_name(k), v) for k, v in zip(keys, values, strict=True)]
                specs.extend(
                    RunSpec(scenario, tuple(overrides), seed, tuple(point)) for seed in grid.seeds
                )
    return resolve(specs, grid.source)


def _scenario_label(scenario: str) -> str:
    return Path(scenario).stem if scenario.endswith(".toml") else scenario


def resolve(specs: Iterable[RunSpec], where: str = "<grid>") -> list[RunSpec]:
    """Load every spec's scenario on the driver: validates it and fills ``run_id`` and ``cost``."""
    out = []
    seen: dict[str, RunSpec] = {}
    cache: dict[tuple, Any] = {}
    for spec in specs:
        key = (spec.scenario, spec.overrides)
        if key not in cache:
            try:
                cache[key] = load_run_scenario(spec)
            except Exception as e:  # the loader's errors name the field; add the file
                raise GridError(f"{where}: {_describe(spec)}: {one_line(e)}") from None
        scenario = cache[key]
        if spec.scenario.endswith(".toml") and not spec.source:
            spec = attrs.evolve(spec, source=Path(spec.scenario).read_text(encoding="utf-8"))
        run_id = run_id_of(scenario, spec.seed)
        if run_id in seen:
            raise GridError(
                f"{where}: {_describe(spec)} and {_describe(seen[run_id])} give the same "
                f"simulation; remove one"
            )
        resolved = attrs.evolve(spec, run_id=run_id, cost=estimated_cost(scenario))
        seen[run_id] = resolved
        out.append(resolved)
    return out


def _describe(spec: RunSpec) -> str:
    return f"scenario {spec.scenario!r}" + (
        f" with {', '.join(spec.overrides)}" if spec.overrides else ""
    )


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# ---------------------------------------------------------------------------------------------
# The simulator, as seen from a sweep (with ``rebalance_sim.lab.engine.task``, the only places that
# know its API)


def load_run_scenario(spec: RunSpec):
    """The scenario object of ``spec`` (built-in name or TOML file, plus overrides). A file's text
    travels in ``spec.source``: on an executor it is loaded from a private copy of the same name
    (the name is the scenario's default name)."""
    from sim.scenario.builtins import load_scenario

    if not spec.source:
        return load_scenario(spec.scenario, list(spec.overrides))
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rebalance-sim-scenario-") as tmp:
        path = Path(tmp) / Path(spec.scenario).name
        path.write_text(spec.source, encoding="utf-8")
        return load_scenario(str(path), list(spec.overrides))


def run_id_of(scenario, seed: int) -> str:
    """The simulator's run id for (scenario, seed): its name, the seed and a config hash."""
    try:
        from sim.run import run_id_for
    except ImportError:  # pragma: no cover - older simulator: hash the repr
        blob = repr(scenario).encode()
        return f"{getattr(scenario, 'name', 'run')}-s{seed}-{hashlib.sha256(blob).hexdigest()[:10]}"
    return run_id_for(scenario, seed)


def estimated_cost(scenario) -> float:
    """Rough relative cost of a run, by which the biggest runs start first and the ETA is made: members
    times the rebalance rounds its timeline causes. A restart wave of dynamic members costs about
    one more round (leave, rejoin), a static wave about a third of one (no rebalance, but the
    members' restarts). A consumer group protocol run costs about 3x the classic one (its members
    heartbeat and reconcile one by one). Only the order of the estimates matters: they decide
    which runs start first and how batches are cut."""
    from sim.scenario.actions import batch_count

    config: Any = getattr(scenario, "config", None)
    try:
        members = config.members
        partitions = sum(t.partitions for t in config.topics)
    except AttributeError:
        return 0.0
    rounds = 1.0
    for action in getattr(scenario, "timeline", ()):
        if getattr(action, "down_s", None) is None:
            continue
        n = len(action.members) if getattr(action, "members", None) else members
        static = (
            action.static if getattr(action, "static", None) is not None else config.consumer.static
        )
        waves = -(-n // max(1, batch_count(getattr(action, "batch_size", 1), n)))
        rounds += waves * (0.3 if static else 1.0)
    protocol = 3.0 if getattr(config.consumer, "group_protocol", "classic") == "consumer" else 1.0
    return (members + partitions / 20) * rounds * protocol
