"""The `rebalance-sim` command line: `main` builds the parser; one module per subcommand."""
