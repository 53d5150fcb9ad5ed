"""The composition root: a scenario wired into actors on a kernel.

``network`` delivers messages (latency, loss, link faults); ``actors`` drive the cores
(coordinator, clients) and play the timeline (``Director``); ``group_types`` is one record per
``group.protocol`` (member core, settled check, phases); ``runner`` builds a run's world and
watches it (member registry, settled check, resource bounds). The world is the only place that
imports both the coordinator and the clients.
"""
