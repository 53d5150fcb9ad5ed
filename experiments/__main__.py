"""`python -m experiments` is the `rebalance-sim` command."""

import sys

from experiments.cli.main import main

sys.exit(main())
