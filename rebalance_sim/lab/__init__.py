"""The lab: many simulations on Spark, the experiments and plans built on them, and their reports.
It imports ``sim`` and ``assignors``; they never import it, nor does it import the command
(``rebalance_sim.cli``). Its libraries (pyspark, pandas, venv-pack) are the ``[lab]`` extra.

Layout, one folder per role:
  engine/     many simulations on Spark: the session and code shipping (``spark``), grid files
              (``grid``), the executor-side task (``task``), the sweep driver (``sweep``), storage
              and commits (``store``, ``table_sink``, ``lock``), aggregation (``aggregate``), the
              generic experiment pipeline (``pipeline``), the regression suite (``regression``)
              and soak's Spark fan-out (``soak``)
  report/     figures, headline sentences, the HTML page, a run's timeline, and one page recipe
              per experiment (``eager_vs_cooperative``, ``protocols``, ``assignor_scaling``) and
              for a plan (``plan``)
  plan/       ``rebalance-sim plan``: a capacity plan for the user's own group (group file or
              describe output, faults x alternatives x growth, the time budget, limits crossed)
  catalog/    the experiments as declarations (grid, scales, seeds, variants, and which recipe
              renders the page), ``common`` for what they share
  bench/      the benchmarks behind ``rebalance-sim bench``
  atomic, outputs, provenance   file writes that never leave half a file, output checks
              (``OutputError``), the model's version and digest: shared by all of the above
  vocabulary  the names a declaration and its page share (assignor column values, scenario
              labels, the simulated consumer, Kafka defaults)
"""
