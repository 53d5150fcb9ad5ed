"""The classic group protocol's coordinator: ``states`` (``ClassicGroupState``) and ``group``
(the classic group's state machine)."""
