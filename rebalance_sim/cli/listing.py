"""The ``list`` subcommand: what can be run, with which parameters.

``rebalance-sim list [--json]`` lists the built-in scenarios (parameters and defaults) and the
experiments.
"""

from __future__ import annotations

import json
import sys


def _param_text(value) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def cmd_list(args) -> int:
    from sim.scenario.builtins import BUILTINS

    from .common import LAB_INSTALL, lab_missing

    if lab_missing() is None:
        from ..lab.catalog import EXPERIMENTS as experiments
    else:  # the experiments are the lab's: without it, the list says how to get them
        experiments = {}
    if args.json:
        json.dump(
            {
                "scenarios": [
                    {"name": b.name, "description": b.description, "parameters": b.params}
                    for b in BUILTINS.values()
                ],
                "experiments": [
                    {"name": e.name, "description": e.description} for e in experiments.values()
                ],
            },
            sys.stdout,
            indent=2,
        )
        print()
        return 0
    print("Scenarios (rebalance-sim run NAME [--set key=value ...]; parameters with defaults):")
    width = max([len(n) for n in BUILTINS] + [len(n) for n in experiments])
    for name, b in BUILTINS.items():
        print(f"  {name:<{width}}  {b.description}")
        params = "  ".join(f"{k}={_param_text(v)}" for k, v in b.params.items())
        print(f"  {'':<{width}}    {params}")
    print(
        "  Any scenario field can also be set with a dotted key, e.g. "
        "--set consumer.session_timeout_ms=10000; `rebalance-sim show NAME` prints every field."
    )
    print("\nExperiments (rebalance-sim experiment NAME):")
    if not experiments:
        print(f"  (they need the lab, which is not installed: {LAB_INSTALL})")
    for e in experiments.values():
        print(f"  {e.name:<{width}}  {e.description}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "list",
        help="built-in scenarios (with parameters and defaults) and experiments",
        description="List the built-in scenarios, each with its parameters and their defaults "
        "(set them with `rebalance-sim run NAME --set key=value`), and the packaged experiments.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_list)
