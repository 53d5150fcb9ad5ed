"""The benchmarks behind `rebalance-sim bench`: assignor times and the simulator's speed and memory."""
