"""The ``timeline`` subcommand: ``rebalance-sim timeline RUN_DIR [--out IMAGE]`` draws which
member owned each partition over time from a directory written by ``rebalance-sim run --out``."""

from __future__ import annotations

import os
import sys

from ..lab.outputs import OutputError, check_output_file
from ..lab.report.timeline import IMAGE_FORMATS, draw_timeline, image_format


def cmd_timeline(args) -> int:
    path = os.path.join(args.run_dir, "intervals.parquet")
    if not os.path.exists(path):
        print(
            f"rebalance-sim timeline: {path}: no such file (expected a directory written by "
            "`rebalance-sim run --out DIR`)",
            file=sys.stderr,
        )
        return 2
    if args.max_partitions < 1:
        print(
            f"rebalance-sim timeline: --max-partitions: {args.max_partitions} must be >= 1",
            file=sys.stderr,
        )
        return 2
    out = args.out or os.path.join(args.run_dir, "timeline.png")
    fmt = image_format(out)
    if fmt is None:
        print(
            f"rebalance-sim timeline: --out {out}: not an image name matplotlib writes "
            f"(give it one of: {', '.join(IMAGE_FORMATS)})",
            file=sys.stderr,
        )
        return 2
    try:
        check_output_file(out)
    except OutputError as e:
        print(f"rebalance-sim timeline: {e}", file=sys.stderr)
        return 2
    try:
        n = draw_timeline(args.run_dir, out, max_partitions=args.max_partitions, fmt=fmt)
    except (OSError, ValueError) as e:
        print(f"rebalance-sim timeline: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({n} partitions)")
    return 0


def register(subparsers) -> None:
    """Add ``timeline`` to the CLI's subparsers."""
    t = subparsers.add_parser(
        "timeline",
        help="draw partition ownership over time from a run directory",
        description="Draw which member owned each partition over time (one row per partition, one "
        "colour per member), with unassigned gaps in red, double processing outlined and "
        "rebalances shaded, from a directory written by `rebalance-sim run --out DIR`.",
    )
    t.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by `run --out`")
    t.add_argument(
        "--out",
        metavar="IMAGE",
        help="output file, its format by its extension: "
        f"{', '.join(IMAGE_FORMATS)} (default RUN_DIR/timeline.png)",
    )
    t.add_argument(
        "--max-partitions",
        type=int,
        default=200,
        help="draw at most this many partitions, >= 1 (default 200)",
    )
    t.set_defaults(func=cmd_timeline)
