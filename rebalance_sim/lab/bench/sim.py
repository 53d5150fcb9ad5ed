"""``rebalance-sim bench sim``: wall time, simulated messages per second and peak memory of the
simulator on large groups (issue 3 targets on a 2-core machine), under both kernels
(``sim.kernel``: the default and the other, interleaved, with the other's time as a ratio of the
default's). Every case runs in a fresh process, so its peak RSS is its own."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from sim import Scenario, compiled, run_scenario
from sim.kernel.tasks import DEFAULT_KERNEL, KERNELS


def _scenario(
    name: str, members: int, partitions: int, action: dict, protocol: str = "classic"
) -> Scenario:
    consumer: dict[str, object] = {"partition_assignment_strategy": ["cooperative-sticky"]}
    if protocol != "classic":
        consumer = {"group_protocol": protocol}  # KIP-848: the coordinator assigns (uniform)
    return Scenario.from_dict(
        {
            "name": name,
            "members": members,
            "topics": [{"name": "events", "partitions": partitions, "rate": 1.0}],
            "consumer": consumer,
            "timeline": [action],
        }
    )


def cases(quick: bool) -> list[tuple[str, Scenario, float | None]]:
    """(label, scenario, wall-time target in seconds or None)."""
    add = {"action": "add_members", "at_s": 60.0}
    crash = {"action": "crash", "at_s": 60.0, "member": "c0001"}
    if quick:
        return [
            ("210x210 coop add one", _scenario("bench-add", 210, 210, add), None),
            (
                "1000x10000 coop crash",
                _scenario("bench-crash", 1000, 10000, dict(crash, member="c001")),
                None,
            ),
            ("scale-out 100 members", _scenario("bench-growth", 100, 1000, add), None),
            ("scale-out 1000 members", _scenario("bench-growth", 1000, 10000, add), None),
            (
                "scale-out 1000 members, consumer protocol",
                _scenario("bench-growth", 1000, 10000, add, "consumer"),
                None,
            ),
            ("run rolling-deploy members=100", _builtin("rolling-deploy", members=100), None),
        ]
    return [
        ("2100x2100 coop add one", _scenario("bench-add", 2100, 2100, add), 10.0),
        ("10000x100000 coop crash", _scenario("bench-crash", 10000, 100000, crash), 120.0),
        ("scale-out 100 members", _scenario("bench-growth", 100, 1000, add), None),
        ("scale-out 1000 members", _scenario("bench-growth", 1000, 10000, add), None),
        ("scale-out 10000 members", _scenario("bench-growth", 10000, 100000, add), None),
        # issue 11 target: a 10,000-member scale-out under the consumer group protocol in <= 60 s
        (
            "scale-out 10000 members, consumer protocol",
            _scenario("bench-growth", 10000, 100000, add, "consumer"),
            60.0,
        ),
        # issue 8: the built-ins as a user types them (`rebalance-sim run NAME --set members=N`)
        ("run crash members=10000", _builtin("crash", members=10000), 60.0),
        ("run rolling-deploy members=1000", _builtin("rolling-deploy", members=1000), 120.0),
        # issue 34: every built-in at 10,000 members in <= 60 s; the classic rolling deploy (dynamic
        # cooperative-sticky members restarting 10% at a time) is the slowest of them
        ("run rolling-deploy members=10000", _builtin("rolling-deploy", members=10000), 60.0),
        (
            "run rolling-deploy members=10000 consumer",
            _builtin("rolling-deploy", members=10000, **{"consumer.group_protocol": "consumer"}),
            60.0,
        ),
        # issue 11: the built-ins at 10,000 members under the consumer group protocol, as typed
        # issue 11 and 34: the consumer group protocol's formation (10,000 members join one by one)
        # then one more member
        (
            "run scale-out members=10000 consumer",
            _builtin("scale-out", members=10000, **{"consumer.group_protocol": "consumer"}),
            60.0,
        ),
        (
            "run crash members=10000 consumer",
            _builtin("crash", members=10000, **{"consumer.group_protocol": "consumer"}),
            60.0,
        ),
        # issue 34: a static rolling bounce (one member at a time, each taking its membership
        # back) and the online migration between the protocols, both ways
        (
            "run rolling-bounce-static members=10000",
            _builtin("rolling-bounce-static", members=10000),
            60.0,
        ),
        (
            "run rolling-bounce-static members=10000 consumer",
            _builtin(
                "rolling-bounce-static", members=10000, **{"consumer.group_protocol": "consumer"}
            ),
            60.0,
        ),
        (
            "run protocol-migration members=10000 (to consumer)",
            _builtin("protocol-migration", members=10000),
            60.0,
        ),
        (
            "run protocol-migration members=10000 consumer (to classic)",
            _builtin(
                "protocol-migration",
                members=10000,
                to="classic",
                **{"consumer.group_protocol": "consumer"},
            ),
            60.0,
        ),
    ]


def _builtin(name: str, **overrides) -> Scenario:
    """A built-in scenario with ``--set`` overrides (its defaults otherwise: for rolling-deploy,
    dynamic cooperative-sticky members restarting 10% of the group at a time)."""
    from sim.scenario.builtins import load_scenario

    return load_scenario(name, {k: str(v) for k, v in overrides.items()})


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux; it is this process's peak so far, hence one process per case
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(
    index: int, quick: bool, kernel: str = DEFAULT_KERNEL, profile: str | None = None
) -> dict:
    """Run case ``index`` with ``kernel`` in this process and return its row (peak RSS covers
    only this case, plus the interpreter and imports, when the process runs nothing else).
    ``profile``: run it under cProfile and write the statistics to this file (pstats format; the
    times then include cProfile's own overhead, about 2x)."""
    label, sc, target = cases(quick)[index]
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    # what `rebalance-sim run` keeps when it writes no files: the rows its metrics read
    result = run_scenario(sc, seed=0, raise_on_violation=False, kernel=kernel, record="none")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if profiler is not None and profile is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    s = result.summary
    # CPU seconds as well: on a shared machine wall time measures the neighbours too.
    # messages_per_s and ok are derived once, from all repeats (``_summarize``).
    return {
        "case": label,
        "kernel": kernel,
        "build": compiled.status(),  # the compiled simulator or its source (sim.compiled)
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "sim_wall_s": s["wall_s"],
        "messages": s["messages"],
        "peak_rss_mib": round(_peak_rss_mib()),
        "target_s": target,
        "invariant_violations": len(result.invariant_violations or []),
        "rounds": s["rounds_total"],
        "rebalance_s": round(s["rebalance_time_max_s"], 3),
    }


def _measure_in_subprocess(
    index: int, quick: bool, kernel: str = DEFAULT_KERNEL, profile: str | None = None
) -> dict:
    """Each case in a fresh interpreter: a process's peak RSS never goes down, so measuring the
    100-member case after the 10,000-member one in the same process would report the latter."""
    argv = (
        [
            sys.executable,
            "-m",
            "rebalance_sim.lab.bench.sim",
            "--case",
            str(index),
            "--kernel",
            kernel,
        ]
        + (["--quick"] if quick else [])
        + (["--profile", profile] if profile else [])
    )
    env = None
    if profile:
        # cProfile sees Python functions only: a profile is of the simulator's source, whichever
        # build the other measurements run (sim.compiled)
        env = {**os.environ, compiled.PURE_ENV: "1"}
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"case {index} failed (exit {p.returncode}): {tail}")
    return json.loads(p.stdout)


def _check_same_run(reps: list[dict]) -> None:
    """The simulated counts must not differ between repeats, nor between kernels (a run is
    deterministic, whichever kernel runs it)."""
    first = reps[0]
    for r in reps[1:]:
        if (r["messages"], r["rounds"], r["rebalance_s"]) != (
            first["messages"],
            first["rounds"],
            first["rebalance_s"],
        ):
            what = "repeats" if r.get("kernel") == first.get("kernel") else "kernels"
            raise RuntimeError(
                f"{what} disagree ({first['messages']:,} vs {r['messages']:,} messages): "
                "the same scenario and seed must give the same run"
            )


def _summarize(reps: list[dict], judge_target: bool = True) -> dict:
    """One case's row from its repeats: median wall and CPU time with their range, the largest peak
    memory. ``judge_target``: whether the case's wall-time target applies (to the default kernel)."""
    import statistics

    _check_same_run(reps)
    first = reps[0]
    row = dict(first)
    for key in ("wall_s", "cpu_s", "sim_wall_s"):
        values = [r[key] for r in reps]
        row[key] = round(statistics.median(values), 3)
        row[f"{key}_min"], row[f"{key}_max"] = min(values), max(values)
    row["messages_per_s"] = (
        round(row["messages"] / row["sim_wall_s"]) if row["sim_wall_s"] else None
    )
    row["peak_rss_mib"] = max(r["peak_rss_mib"] for r in reps)
    # the target is judged on the median; any repeat with an invariant violation fails the case
    row["invariant_violations"] = max(r["invariant_violations"] for r in reps)
    row["ok"] = (
        not judge_target or row["target_s"] is None or row["wall_s"] <= row["target_s"]
    ) and not row["invariant_violations"]
    row["repeat"] = len(reps)
    return row


def cmd_bench_sim(args) -> int:
    repeat = getattr(args, "repeat", 1)
    if repeat < 1:
        print(f"rebalance-sim bench sim: --repeat: {repeat} must be >= 1", file=sys.stderr)
        return 2
    all_cases = cases(args.quick)
    labels = [label for label, _sc, _t in all_cases]
    only = [text.lower() for text in getattr(args, "only", None) or []]
    for text in only:
        if not any(text in label.lower() for label in labels):
            print(
                f"rebalance-sim bench sim: --only: {text!r} matches no case; cases: {'; '.join(labels)}",
                file=sys.stderr,
            )
            return 2
    chosen = [
        i for i, label in enumerate(labels) if not only or any(t in label.lower() for t in only)
    ]
    kernel = getattr(args, "kernel", None)
    if kernel is not None and kernel not in KERNELS:
        print(
            f"rebalance-sim bench sim: --kernel: {kernel!r} is not one of {', '.join(sorted(KERNELS))}",
            file=sys.stderr,
        )
        return 2
    # the default kernel first, its target judged; the other as a ratio of it
    kernels = (
        [kernel] if kernel else [DEFAULT_KERNEL, *sorted(k for k in KERNELS if k != DEFAULT_KERNEL)]
    )
    profile_dir = getattr(args, "profile", None)
    if profile_dir is not None:
        import os

        if os.path.exists(profile_dir) and not os.path.isdir(profile_dir):
            print(
                f"rebalance-sim bench sim: --profile: {profile_dir!r} is not a directory",
                file=sys.stderr,
            )
            return 2
        os.makedirs(profile_dir, exist_ok=True)
        return _profile_cases(chosen, all_cases, kernels[0], args.quick, profile_dir)
    rows = []
    if not args.json:
        # (each case's process imports the same build, unless its source changes meanwhile)
        print(f"simulator: {compiled.status()}", flush=True)
    for index in chosen:
        label, _sc, target = all_cases[index]
        reps: dict[str, list[dict]] = {k: [] for k in kernels}
        try:
            # each repeat in a fresh process, so that each peak memory is the case's own; the
            # kernels alternate (and which goes first), so that a machine's drift hits both
            for r in range(repeat):
                for k in kernels if r % 2 == 0 else kernels[::-1]:
                    reps[k].append(_measure_in_subprocess(index, args.quick, k))
            _check_same_run([rep for k in kernels for rep in reps[k]])
            case_rows = [_summarize(reps[k], judge_target=k == DEFAULT_KERNEL) for k in kernels]
        except RuntimeError as e:
            print(f"rebalance-sim bench sim: {label}: {e}", file=sys.stderr)
            return 1
        base = case_rows[0]
        for row in case_rows[1:]:
            for key in ("wall_s", "cpu_s"):
                row[f"{key}_ratio"] = round(row[key] / base[key], 2) if base[key] else None
            row["ratio_to"] = base["kernel"]
        rows += case_rows
        if not args.json:
            for row in case_rows:
                spread = (
                    f" (CPU {row['cpu_s_min']:.2f}-{row['cpu_s_max']:.2f}s over {repeat} runs)"
                    if repeat > 1
                    else ""
                )
                ratio = (
                    f"  x{row['cpu_s_ratio']:.2f} CPU, x{row['wall_s_ratio']:.2f} wall of {row['ratio_to']}"
                    if row.get("ratio_to") and row["cpu_s_ratio"] and row["wall_s_ratio"]
                    else ""
                )
                print(
                    f"{label:<28} {row['kernel']:<6} wall {row['wall_s']:7.2f}s  CPU {row['cpu_s']:7.2f}s{spread}  "
                    f"(simulation {row['sim_wall_s']:.2f}s, rest = "
                    f"metrics/tables)  messages {row['messages']:>8,}  {row['messages_per_s'] or 0:>8,}/s  "
                    f"peak RSS {row['peak_rss_mib']:>6,} MiB"
                    + (
                        f"  target <= {target:g}s {'OK' if row['ok'] else 'MISSED'}"
                        if target and row["kernel"] == DEFAULT_KERNEL
                        else ""
                    )
                    + ratio,
                    flush=True,
                )
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if all(r["ok"] for r in rows) else 1


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in label.lower()).strip("-")


def _profile_cases(chosen: list[int], all_cases, kernel: str, quick: bool, out_dir: str) -> int:
    """Each chosen case once under cProfile (one process each): ``DIR/<case>.prof`` (pstats) and
    ``DIR/<case>.txt``, the functions by own time and by cumulative time."""
    import io
    import os
    import pstats

    for index in chosen:
        label = all_cases[index][0]
        path = os.path.join(out_dir, _slug(label) + ".prof")
        try:
            row = _measure_in_subprocess(index, quick, kernel, profile=path)
        except RuntimeError as e:
            print(f"rebalance-sim bench sim: {label}: {e}", file=sys.stderr)
            return 1
        text = io.StringIO()
        stats = pstats.Stats(path, stream=text).strip_dirs()
        stats.sort_stats("tottime").print_stats(40)
        stats.sort_stats("cumulative").print_stats(40)
        with open(path[: -len(".prof")] + ".txt", "w") as f:
            f.write(text.getvalue())
        print(
            f"{label:<28} {kernel:<6} wall {row['wall_s']:7.2f}s under cProfile ({row['build']})  messages {row['messages']:>8,}  "
            f"-> {path} (.txt: top functions)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    # one case, as a child of `rebalance-sim bench sim`: its row as JSON on stdout
    parser = argparse.ArgumentParser(prog="bench_sim")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--case", type=int, required=True)
    parser.add_argument("--kernel", default=DEFAULT_KERNEL, choices=sorted(KERNELS))
    parser.add_argument("--profile")
    a = parser.parse_args()
    print(json.dumps(measure(a.case, a.quick, a.kernel, a.profile)))
