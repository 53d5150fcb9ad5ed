"""`python -m rebalance_sim` is the `rebalance-sim` command."""

import sys

from rebalance_sim.cli.main import main

sys.exit(main())
