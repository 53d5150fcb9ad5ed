"""What crosses the simulated network: Kafka's requests and responses, the simulator's control
notes (``messages``), member and client ids in Kafka's forms (``ids``) and the directions of a
link fault (``faults``). Both sides of the wire import these; neither side imports the other.
"""
