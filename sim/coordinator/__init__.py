"""The group coordinator (Kafka's ``group-coordinator`` module), as sans-I/O cores.

``classic`` is the classic group (JoinGroup / SyncGroup, Kafka's ``ClassicGroup``); ``consumer``
the consumer group of KIP-848 (``ConsumerGroup``, ``CurrentAssignmentBuilder``,
``TargetAssignmentBuilder``), with its classic members during an online migration; ``migration``
holds the one group of a run as either type and converts it; ``offsets`` is the committed-offset
store that belongs to the group whatever its type. Nothing here imports ``sim.client``: the two
sides meet only through ``sim.wire``.
"""
