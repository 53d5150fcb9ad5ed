"""Running many simulations on Spark: grids, the executor task, the sweep driver, storage,
aggregation, and the generic experiment pipeline."""
