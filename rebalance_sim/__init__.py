"""The product around the simulator: the ``rebalance-sim`` command (``cli``) and the lab that runs
many simulations on Spark and writes their reports (``lab``). The simulator (``sim``) and the
assignors (``assignors``) are packages of their own, imported by users' scripts as they are.

Layering, one way: ``rebalance_sim.cli -> rebalance_sim.lab -> sim -> assignors`` (the command
may import ``sim`` too). Nothing here is imported at ``import rebalance_sim``.
"""
