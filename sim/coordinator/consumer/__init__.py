"""The consumer group protocol's coordinator (KIP-848), one module per part of Kafka's
``modern.consumer`` package: ``states`` (the member's and the group's states), ``member`` (what the
coordinator knows of a member, ``ConsumerGroupMember``), ``reconcile`` (``CurrentAssignmentBuilder``
as a pure function), ``members_order`` (the members map's iteration order), ``target`` (the
server-side assignor's call, ``TargetAssignmentBuilder``), ``group`` (the group and its heartbeat,
``GroupMetadataManager.consumerGroupHeartbeat``) and ``classic_members`` (classic members inside a
consumer group during an online migration).
"""
