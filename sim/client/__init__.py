"""The consumer clients (Kafka's ``clients`` module), as sans-I/O cores.

``base`` is what both group protocols' clients share (``ConsumerClient``: poll loop, positions,
commits, callbacks, pauses); ``classic`` the classic protocol's member (``ConsumerCoordinator`` on
``AbstractCoordinator``); ``consumer`` the consumer protocol's (``ConsumerMembershipManager``);
``cooperative`` the cooperative check of an assignment; ``handoffs`` the run's record of partitions
changing hands, shared by its clients. Nothing here imports ``sim.coordinator``: the two sides
meet only through ``sim.wire``.
"""
