"""`python -m experiments` is the `rebalance-sim` command."""

import sys

from experiments.cli import main

sys.exit(main())
