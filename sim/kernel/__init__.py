"""The kernel: actors and virtual time, and nothing of Kafka.

``queue`` holds the deterministic queue of timed inputs, the ``Actor`` base and the inline kernel;
``tasks`` the task kernel (each actor a trio task); ``rng`` the per-actor seeded random streams;
``stop`` the request to stop a run from outside it (Ctrl-C, a wall-time limit). Nothing here
imports the wire, the coordinator, the clients or the world that wires them.
"""
