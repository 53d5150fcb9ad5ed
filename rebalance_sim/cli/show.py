"""The ``show`` subcommand: ``rebalance-sim show SCENARIO [--set ...]`` prints the resolved
scenario as TOML, every field included, ready to save and edit."""

from __future__ import annotations

import argparse
import sys


def _plain(value):
    """An attrs config as TOML-able values: tables as dicts, tuples as lists, unset (None) and
    empty tables left out."""
    if isinstance(value, dict):
        out = {k: _plain(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in out.items() if v != {}}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def scenario_toml(name_or_path: str, overrides: list[str]) -> str:
    """The scenario ``name_or_path`` with ``overrides`` applied, as a TOML scenario file that
    ``rebalance-sim run`` accepts and that runs the same simulation: every field, defaults
    included."""
    import tomllib

    import attrs

    from sim import Scenario
    from sim.scenario.actions import action_to_dict
    from sim.scenario.builtins import BUILTINS, load_scenario, parse_overrides, to_toml

    scenario = load_scenario(name_or_path, overrides)  # validates, with the loader's errors
    what = (
        f"built-in scenario {name_or_path}"
        if name_or_path in BUILTINS
        else f"scenario file {name_or_path}"
    )
    header = f"# {what}" + (f" with {' '.join(overrides)}" if overrides else "")
    data = _plain(
        {
            "name": scenario.name,
            "description": scenario.description,
            **attrs.asdict(scenario.config),
            "timeline": [action_to_dict(a) for a in scenario.timeline],
        }
    )
    if not data["timeline"]:
        del data["timeline"]
    given = parse_overrides(overrides)
    text = f"{header}\n# every field, defaults included (Kafka's, see the README)\n" + to_toml(data)
    if "max_duration_s" not in given and name_or_path in BUILTINS:
        # a built-in's limit grows with its timeline: printed, it no longer would
        text = text.replace(
            "\nmax_duration_s = ",
            "\n# grown with the timeline; remove it to let an edited timeline grow it again\n"
            "max_duration_s = ",
            1,
        )
    Scenario.from_dict(tomllib.loads(text))  # what we print must load
    return text


def cmd_show(args) -> int:
    from assignors import AssignorError
    from sim import ConfigError

    try:
        text = scenario_toml(args.scenario, args.set or [])
    except (ConfigError, AssignorError) as e:
        print(f"rebalance-sim show: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError) as e:
        print(f"rebalance-sim show: {args.scenario}: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "show",
        help="print a scenario, resolved, as a TOML file you can save and edit",
        description="Print a built-in scenario or a TOML scenario file with --set overrides "
        "applied, as TOML that `rebalance-sim run FILE` accepts.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  rebalance-sim show crash --set members=12 > my-crash.toml\n"
        "  rebalance-sim run my-crash.toml",
    )
    p.add_argument("scenario", help="built-in name or path to a .toml file")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a parameter (repeatable)"
    )
    p.set_defaults(func=cmd_show)
